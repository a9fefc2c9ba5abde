"""Where a Trainer step's time goes: steady fp32 MiniLM-L6 steps (the Trainer's optimizer and batch widths, real
reviews) under TensorFlow's profiler with one op running at a time, so that op times add up to the step; the op
time grouped by the work it does, forward and gradient together.

Utilization = the matmuls' share of the step x their FLOP/s over the peak. The profile says which factor holds the
Trainer below a target and how much of the rest would have to go. `make bench` runs this module in its own process
(`python -m benchmarks.step_profile`): TensorFlow fixes its inter-op thread count when it starts.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import tempfile
import time
from pathlib import Path

from models.encoders.attention import ATTENTION_SCOPE

UTILIZATION_TARGET = 0.60  # issue #14: the Trainer at >= 60% of the measured matmul peak

# Kinds of work in the order the table lists them; an op joins the first kind whose test it passes.
MATMULS = "matmuls"
OPTIMIZER = "optimizer update (AdamW: moments, decay, step)"
LAYER_NORM = "LayerNorm"
GELU = "GELU"
DROPOUT = "dropout (random numbers, masks)"
ATTENTION = "attention scale, mask, softmax, head transposes"
BIAS = "bias adds and their gradients"
OTHER = "other ops (embeddings, loss, gradient sums)"
WORK_KINDS = (MATMULS, OPTIMIZER, LAYER_NORM, GELU, DROPOUT, ATTENTION, BIAS, OTHER)
_SCOPE_KINDS = ((LAYER_NORM, "LayerNorm"), (GELU, "Gelu"), (DROPOUT, "dropout"), (ATTENTION, ATTENTION_SCOPE))


def work_kind(op_name: str, optimizer_name: str) -> str:
    """The kind of work of a profiled graph op named `scope/name:OpType`. Gradient ops carry their forward op's
    scope under `gradient_tape/`, so a kind holds both passes; the optimizer's ops sit under its name."""
    scope, _, op_type = op_name.rpartition(":")
    if "MatMul" in op_type:  # MatMul, BatchMatMulV2 and their oneDNN forms (_MklMatMul, _MklBatchMatMulV2)
        return MATMULS
    if scope.startswith(optimizer_name + "/"):
        return OPTIMIZER
    for kind, marker in _SCOPE_KINDS:
        if marker in scope:
            return kind
    if op_type in ("BiasAdd", "BiasAddGrad"):
        return BIAS
    return OTHER


def profiled_op_seconds(logdir: str) -> dict[str, float]:
    """Seconds per graph op (`scope/name:OpType`) on TensorFlow's executor threads in a profile under logdir."""
    # TensorFlow has no public reader of its profiler's per-op events; the XSpace proto is what it writes.
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    seconds: collections.Counter[str] = collections.Counter()
    for path in Path(logdir).rglob("*.xplane.pb"):
        space = xplane_pb2.XSpace.FromString(path.read_bytes())
        for plane in space.planes:
            for line in plane.lines:
                if not line.name.startswith("tf_Compute"):  # not Python, tf.data or intra-op worker threads
                    continue
                for event in line.events:
                    name = plane.event_metadata[event.metadata_id].name
                    if ":" in name and not name.startswith("ExecutorState"):  # ops, not the executor's wrappers
                        seconds[name] += event.duration_ps / 1e12
    return dict(seconds)


def seconds_by_kind(op_seconds: dict[str, float], optimizer_name: str) -> dict[str, float]:
    totals = dict.fromkeys(WORK_KINDS, 0.0)
    for name, seconds in op_seconds.items():
        totals[work_kind(name, optimizer_name)] += seconds
    return totals


def cut_for_target(matmul_share: float, matmul_efficiency: float, target: float) -> float | None:
    """Share of the non-matmul time that would have to go for utilization `target` with the matmuls as they
    run; None if the matmuls alone run below the target. From target = efficiency x M / (M + rest')."""
    if matmul_efficiency <= target or matmul_share >= 1:
        return None
    rest_needed = matmul_share * (matmul_efficiency / target - 1)
    return max(0.0, 1 - rest_needed / (1 - matmul_share))


@dataclasses.dataclass
class StepProfile:
    steps: int
    seconds: float  # wall time of the profiled steps
    training_flops: float  # model FLOPs of the batches those steps ran
    peak_gflops: float
    by_kind: dict[str, float]  # op seconds per work kind
    unprofiled_gflops: float  # model FLOP/s of as many steps just before, one op at a time but not profiled

    @property
    def utilization(self) -> float:
        return self.training_flops / self.seconds / 1e9 / self.peak_gflops

    def rows(self) -> list[dict[str, str]]:
        """The table's rows (name, value, baseline, ratio): the step, the matmuls, every other kind, the cut."""
        matmul_gflops = self.training_flops / max(self.by_kind[MATMULS], 1e-9) / 1e9
        efficiency = matmul_gflops / self.peak_gflops
        matmul_share = self.by_kind[MATMULS] / self.seconds
        between_ops = self.seconds - sum(self.by_kind.values())
        cut = cut_for_target(matmul_share, efficiency, UTILIZATION_TARGET)
        peak = f"{self.peak_gflops:.0f} GFLOP/s peak"
        step = (
            f"Trainer step, fp32, profiled one op at a time ({self.steps} steps, "
            f"{1000 * self.seconds / self.steps:.0f} ms a step): model FLOP/s vs the fp32 matmul peak"
        )
        rows = [
            (step, f"{self.training_flops / self.seconds / 1e9:.1f} GFLOP/s", peak, f"{self.utilization:.0%}"),
            ("· the same loop unprofiled (one op at a time too): model FLOP/s vs profiled",
             f"{self.unprofiled_gflops:.1f} GFLOP/s", f"{self.training_flops / self.seconds / 1e9:.1f} GFLOP/s",
             f"{self.unprofiled_gflops * self.seconds * 1e9 / self.training_flops:.2f}x"),
            (f"· {MATMULS}: share of the step; their FLOP/s vs the peak", f"{matmul_share:.1%}; {matmul_gflops:.0f} "
             "GFLOP/s", peak, f"{efficiency:.0%}"),
            *((f"· {kind}: share of the step", f"{self.by_kind[kind] / self.seconds:.1%}", "-", "-")
              for kind in WORK_KINDS[1:]),
            ("· between ops (executor, Python, input): share of the step", f"{between_ops / self.seconds:.1%}", "-",
             "-"),
            (f"non-matmul time to remove for {UTILIZATION_TARGET:.0%} utilization with the matmuls as they run",
             "unreachable: the matmuls alone run below it" if cut is None else f"{cut:.0%}", "-", "-"),
        ]  # fmt: skip
        return [dict(zip(("name", "value", "baseline", "ratio"), row, strict=True)) for row in rows]


def profile_steps(steps: int, warmup_steps: int = 30) -> StepProfile:
    """Profiles `steps` steady steps of the Trainer's fp32 loop after `warmup_steps` (tracing, both widths)."""
    import tensorflow as tf
    import tf_keras

    from benchmarks.bench import MAX_LEN, trainer_batches, training_examples
    from components.trainer.module import compile_for_training
    from components.trainer.training_meter import TrainingMeter, record_batch_shapes
    from models.encoders.from_folder import build_classifier
    from models.hardware.machine_peak import matmul_peak
    from models.training.config import TrainingConfig

    files, examples = training_examples(steps + warmup_steps)
    training = TrainingConfig()
    data = trainer_batches(examples, training)
    tf_keras.utils.set_random_seed(0)
    model = build_classifier(files, ["rotten", "fresh"])[0]
    model.bound_width(MAX_LEN)  # as the Trainer bounds it
    compile_for_training(model, training, steps + warmup_steps)
    model.fit(data, steps_per_epoch=warmup_steps, epochs=1, verbose=0)
    shape = model.encoder_shape()
    unprofiled, profiled = TrainingMeter(shape, None), TrainingMeter(shape, None)
    started = time.perf_counter()
    model.fit(record_batch_shapes(data, unprofiled.records), steps_per_epoch=steps, epochs=1, verbose=0)
    unprofiled_gflops = unprofiled.model_gflops(steps, time.perf_counter() - started)
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        started = time.perf_counter()
        model.fit(record_batch_shapes(data, profiled.records), steps_per_epoch=steps, epochs=1, verbose=0)
        seconds = time.perf_counter() - started
        tf.profiler.experimental.stop()
        op_seconds = profiled_op_seconds(logdir)
    return StepProfile(
        steps=steps,
        seconds=seconds,
        training_flops=profiled.totals(steps).training_flops(shape),
        peak_gflops=matmul_peak("float32").gflops,
        by_kind=seconds_by_kind(op_seconds, model.optimizer.get_config()["name"]),
        unprofiled_gflops=unprofiled_gflops,
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20, help="profiled training steps")
    args = parser.parse_args(argv)
    import tensorflow as tf

    tf.config.threading.set_inter_op_parallelism_threads(1)  # one op at a time: op times add up to the step
    print(json.dumps(profile_steps(args.steps).rows()))  # the last line: what `make bench` reads
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
