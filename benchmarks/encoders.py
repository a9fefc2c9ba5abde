"""`make bench-encoders`: our Keras encoders on the Trainer's loop, and a ModernBERT-base-shaped model at the widths
long pages want.

- MiniLM (packaged, real weights), the Trainer's loop (batch widths, AdamW schedule), fp32: our BERT encoder, best
  of --repeats, as model FLOP/s against the fp32 matmul peak measured in the same run.
- MiniLM at width 512, batch 32, in a fresh process each: training's peak memory with the attention weights
  recomputed in the backward pass (models/encoders/attention.py) against kept, and its cost in step time.
- Each family's base shape (BERT, GTE, EuroBERT, mmBERT; random weights) at width 128, batch 16, in a fresh process
  each: examples/s and share of the peak, beside BERT-base's.
- ModernBERT-base's shape (22 layers, hidden 768, GeGLU 1152, local window 128, random weights: no pretrained one is
  reachable here), one training step at each width, in a fresh process per width: seconds per step, share of the
  peak, and the process's peak memory. A width whose step would not fit this machine's memory (the estimate
  `--check` prints: models/encoders/step_memory.py) is reported as such, not run.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import reference

SECTION = (
    "## Encoders: ours on the Trainer's loop (against transformers 4.57's TF class while it was in the stack), and "
    "ModernBERT at long widths (`make bench-encoders`)"
)
MODERNBERT_BASE = {
    "model_type": "modernbert", "vocab_size": 50368, "hidden_size": 768, "intermediate_size": 1152,
    "num_hidden_layers": 22, "num_attention_heads": 12, "local_attention": 128, "global_attn_every_n_layers": 3,
    "max_position_embeddings": 8192, "pad_token_id": 50283, "classifier_pooling": "mean",
}  # fmt: skip
# UltraBERT at ModernBERT-base's sizes (no UltraBERT checkpoint is reachable here): Llama-style blocks, a +-128 window
# in two of every three layers, 32,768 positions, a 32K vocabulary.
ULTRABERT_BASE = {
    "model_type": "ultrabert", "vocab_size": 32768, "hidden_size": 768, "intermediate_size": 1152,
    "num_hidden_layers": 22, "num_attention_heads": 12, "num_key_value_heads": 12, "sliding_window": 128,
    "max_position_embeddings": 32768, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
}  # fmt: skip
LONG_SHAPES = {"ModernBERT-base shape": MODERNBERT_BASE, "UltraBERT at ModernBERT-base's sizes": ULTRABERT_BASE}
# Base-size shapes of the families side by side (random weights: none is reachable here), as their hub configs set them.
_BASE = {"hidden_size": 768, "num_attention_heads": 12, "num_hidden_layers": 12, "intermediate_size": 3072}
FAMILY_SHAPES = {
    "BERT-base": {"model_type": "bert", "vocab_size": 30522, "max_position_embeddings": 512, **_BASE},
    "GTE (gte-multilingual-base)": {"model_type": "gte", "vocab_size": 250048, "max_position_embeddings": 8192,
                                    "type_vocab_size": 1, **_BASE},
    "EuroBERT-210m": {"model_type": "eurobert", "vocab_size": 128256, "max_position_embeddings": 8192,
                      "num_key_value_heads": 12, "pad_token_id": 128001, **_BASE},
    "mmBERT-base (ModernBERT)": {**MODERNBERT_BASE, "vocab_size": 256000, "pad_token_id": 0},
}  # fmt: skip
FAMILY_WIDTH, FAMILY_BATCH = 128, 16


def _minilm_rows(steps: int, repeats: int, peak) -> list[list[str]]:
    """The Trainer's loop on the packaged MiniLM through our encoder: best of `repeats` passes, share of the peak.
    (transformers 4.57's TF class, the baseline this was measured against while it was in the stack, ran 1.01x
    slower: BENCHMARKS.md.)"""
    import tf_keras

    from benchmarks.bench import BATCH, MAX_LEN, _examples_per_second, trainer_batches, training_examples
    from components.trainer.module import compile_for_training
    from components.trainer.training_meter import TrainingMeter
    from models.encoders.from_folder import build_with_own_encoder
    from models.training.config import TrainingConfig

    files, examples = training_examples(steps)
    training = TrainingConfig()
    batches = trainer_batches(examples, training)
    tf_keras.utils.set_random_seed(0)
    model, _ = build_with_own_encoder(files, ["rotten", "fresh"], False)
    model.bound_width(MAX_LEN)  # as the Trainer bounds it
    compile_for_training(model, training, steps * (repeats + 1))
    best, record = 0.0, []
    for _ in range(repeats):
        shapes: list = []
        rate = _examples_per_second(model, batches, steps, shapes)
        if rate > best:
            best, record = rate, shapes
    meter = TrainingMeter(model.encoder_shape(), peak, records=record)
    gflops = meter.model_gflops(steps, steps * BATCH / best)
    return [
        ["MiniLM-L6 Trainer loop, fp32, our encoder: examples/s; model GFLOP/s", f"{best:.1f}; {gflops:.1f}",
         f"{peak.gflops:.0f} GFLOP/s peak", f"{gflops / peak.gflops:.0%}"]
    ]  # fmt: skip


def one_width(width: int, batch: int, steps: int, family: str = "") -> dict:
    """One process: ModernBERT-base's shape (or FAMILY_SHAPES[family], LONG_SHAPES[family]) trained `steps` steps at
    `width` (the first traces); its numbers."""
    import numpy as np
    import tensorflow as tf

    from components.trainer.module import compile_for_training
    from models.encoders import classifier
    from models.encoders.step_memory import machine_memory, recompute_blocks_pays
    from models.training.config import TrainingConfig

    config = {**FAMILY_SHAPES, **LONG_SHAPES}[family] if family else MODERNBERT_BASE
    model = classifier.build(config, ["a", "b"])
    can = classifier.can_recompute_blocks(classifier.block_dropout(config))
    recompute = recompute_blocks_pays(model.encoder_shape(), batch, width, machine_memory(), can)
    if recompute:  # as the Trainer decides (components/trainer/module.py: recompute_blocks_where_needed)
        model.recompute_blocks()
    compile_for_training(model, TrainingConfig(learning_rate=1e-5, warmup_ratio=0.0), steps + 1)
    rng = np.random.default_rng(0)
    features = {"input_ids": rng.integers(5, 30000, (batch, width)), "attention_mask": np.ones((batch, width), int)}
    data = tf.data.Dataset.from_tensors((features, np.zeros(batch, int))).repeat()
    model.fit(data, steps_per_epoch=1, epochs=1, verbose=0)
    started = time.perf_counter()
    model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0)
    seconds = (time.perf_counter() - started) / steps
    shape = model.encoder_shape()
    flops = shape.training_flops(batch, batch * width, batch * width * width)
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return {
        "width": width, "batch": batch, "seconds": seconds, "gflops": flops / seconds / 1e9, "peak_gib": peak_gib,
        "recomputed": recompute,
    }  # fmt: skip


def one_memory(width: int, batch: int, recompute: int) -> dict:
    """One process: MiniLM (packaged) trained 2 steps at `width` with the attention weights and the feed-forward's
    activation recomputed in the backward pass where the Trainer would (`recompute` 1) or kept (0); seconds per step
    and the process's peak memory."""
    import numpy as np
    import tensorflow as tf

    from components.trainer.module import compile_for_training
    from models.encoders import activations, attention
    from models.encoders.from_folder import build_classifier, read_model_folder
    from models.hub.pretrained import packaged_model_dir
    from models.training.config import TrainingConfig

    if not recompute:
        attention.RECOMPUTE_ABOVE_BYTES = activations.RECOMPUTE_ACTIVATION_ABOVE_BYTES = 2**62
    model, _ = build_classifier(read_model_folder(packaged_model_dir("all-MiniLM-L6-v2")), ["a", "b"])
    compile_for_training(model, TrainingConfig(warmup_ratio=0.0), 4)
    rng = np.random.default_rng(0)
    features = {
        "input_ids": rng.integers(1000, 30000, (batch, width)),
        "attention_mask": np.ones((batch, width), int),
        "token_type_ids": np.zeros((batch, width), int),
    }
    data = tf.data.Dataset.from_tensors((features, np.arange(batch) % 2)).repeat()
    model.fit(data, steps_per_epoch=1, epochs=1, verbose=0)
    started = time.perf_counter()
    model.fit(data, steps_per_epoch=2, epochs=1, verbose=0)
    seconds = (time.perf_counter() - started) / 2
    return {"seconds": seconds, "peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}


def _memory_rows(width: int, batch: int) -> list[list[str]]:
    results = {}
    for recompute in (1, 0):
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.encoders", "--one-memory", str(width), str(batch), str(recompute)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode:
            return [[f"MiniLM-L6 at width {width}", f"failed: {done.stderr.strip().splitlines()[-1][:120]}", "-", "-"]]
        results[recompute] = json.loads(done.stdout.strip().splitlines()[-1])
    ours, kept = results[1], results[0]
    return [
        [f"MiniLM-L6 training at width {width}, batch {batch}: peak GiB, attention and GELU recomputed vs kept",
         f"{ours['peak_gib']:.1f}", f"{kept['peak_gib']:.1f}", f"{ours['peak_gib'] / kept['peak_gib']:.2f}x"],
        ["· the same: seconds per step", f"{ours['seconds']:.1f}", f"{kept['seconds']:.1f}",
         f"{ours['seconds'] / kept['seconds']:.2f}x"],
    ]  # fmt: skip


def _long_rows(widths: list[int], steps: int, peak, shapes: list[str]) -> list[list[str]]:
    """Each of LONG_SHAPES at each width, a fresh process each: its step's seconds, share of the peak and peak
    memory, beside the estimate `--check` prints for it (models/encoders/step_memory.py)."""
    from models.encoders import classifier
    from models.encoders.step_memory import FITS_SHARE, GIB, machine_memory, recompute_blocks_pays, step_memory

    rows = []
    memory = machine_memory()
    for family in shapes:
        config = LONG_SHAPES[family]
        shape = classifier.encoder_shape(config, 2)
        can = classifier.can_recompute_blocks(classifier.block_dropout(config))
        for width in widths:
            batch = max(1, 1024 // width)
            recompute = recompute_blocks_pays(shape, batch, width, memory, can)
            need = step_memory(shape, batch, width, recompute).total
            blocks = ", blocks recomputed" if recompute else ""
            name = f"{family}, width {width:,}, batch {batch}{blocks}: s/step; model GFLOP/s; peak GiB (estimated)"
            if need > FITS_SHARE * memory:
                rows.append([name, f"not run: a step needs ~{need / GIB:,.0f} GiB", f"{memory / GIB:.0f} GiB", "-"])
                continue
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks.encoders", "--one-family", family, str(width), str(batch),
                 str(steps)],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if done.returncode:
                rows.append([name, f"failed: {done.stderr.strip().splitlines()[-1][:120]}", "-", "-"])
                continue
            result = json.loads(done.stdout.strip().splitlines()[-1])
            rows.append(
                [name, f"{result['seconds']:.1f}; {result['gflops']:.1f}; {result['peak_gib']:.1f} ({need / GIB:.1f})",
                 f"{peak.gflops:.0f} GFLOP/s peak", f"{result['gflops'] / peak.gflops:.0%}"]
            )  # fmt: skip
    return rows


def _family_rows(steps: int, peak) -> list[list[str]]:
    """Each family's base shape, one Trainer step at FAMILY_WIDTH x FAMILY_BATCH in a fresh process: examples/s and
    share of the peak, beside BERT-base's."""
    rows, bert = [], None
    for family in FAMILY_SHAPES:
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.encoders", "--one-family", family, str(FAMILY_WIDTH),
             str(FAMILY_BATCH), str(steps)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        name = f"{family}, width {FAMILY_WIDTH}, batch {FAMILY_BATCH}: examples/s; model GFLOP/s"
        if done.returncode:
            rows.append([name, f"failed: {done.stderr.strip().splitlines()[-1][:120]}", "-", "-"])
            continue
        result = json.loads(done.stdout.strip().splitlines()[-1])
        rate = result["batch"] / result["seconds"]
        bert = bert or rate
        rows.append(
            [name, f"{rate:.1f}; {result['gflops']:.1f}", f"{peak.gflops:.0f} GFLOP/s peak; BERT-base {bert:.1f}/s",
             f"{result['gflops'] / peak.gflops:.0%} of peak; {rate / bert:.2f}x BERT's rate"]
        )  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="timed MiniLM steps per repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--widths", default="512,2048,8192", help="ModernBERT's and UltraBERT's widths")
    parser.add_argument("--long-steps", type=int, default=2, help="timed long-width steps per width")
    parser.add_argument("--long-shapes", default=",".join(LONG_SHAPES), help="comma-separated, of LONG_SHAPES")
    parser.add_argument("--memory-width", type=int, default=512, help="MiniLM's width for the memory rows (0: none)")
    parser.add_argument("--one-memory", nargs=3, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--one-family", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--families", type=int, default=1, help="each family's base shape beside BERT's (0: none)")
    parser.add_argument("--out", default=str(reference.BENCHMARKS_MD))
    args = parser.parse_args(argv)
    if args.one_memory:
        print(json.dumps(one_memory(*args.one_memory)))
        return 0
    if args.one_family:
        family, width, batch, steps = args.one_family
        print(json.dumps(one_width(int(width), int(batch), int(steps), family)))
        return 0

    from models.hardware.machine_peak import matmul_peak

    started = time.monotonic()
    peak = matmul_peak()
    rows = _minilm_rows(args.steps, args.repeats, peak)
    rows += _memory_rows(args.memory_width, 32) if args.memory_width else []
    rows += _family_rows(args.long_steps, peak) if args.families else []
    shapes = [name for name in args.long_shapes.split(",") if name]
    rows += _long_rows([int(w) for w in args.widths.split(",") if w], args.long_steps, peak, shapes)
    section = reference.table_section(
        SECTION,
        [
            f"Measured on this machine in {time.monotonic() - started:.0f} s, fp32 matmul peak {peak.gflops:.0f} "
            "GFLOP/s measured in the same run. Model FLOPs count the matmuls (models/hardware/flops.py; gated "
            "feed-forwards' three matrices counted); ModernBERT's local layers are counted at full width (past 512 "
            "tokens they compute only their band: the share of peak reads high there), recomputation not counted. "
            "Batches of ModernBERT hold 1,024 tokens (one text from 1,024 up); blocks are recomputed in the backward "
            "pass where the step would not fit kept (as the Trainer decides); peak GiB is the measuring process's "
            "peak RSS. The families' rows time 2 steps each: a few percent of noise."
        ],
        ["what", "measured", "baseline", "ratio"],
        ["---", "---:", "---:", "---:"],
        rows,
    )
    reference.publish_sections([section], Path(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
