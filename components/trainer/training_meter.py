"""How much of the machine the Trainer uses: model FLOP/s from the batches it actually ran, over the
matmul peak measured in the same run. Printed with its progress, written beside the model for the summary."""

from __future__ import annotations

import dataclasses
import json
import os

import tensorflow as tf

from models.hardware.flops import BatchShapes, EncoderShape
from models.hardware.machine_peak import MatmulPeak
from models.names import ATTENTION_MASK

THROUGHPUT_FILE = "throughput.json"  # in the Trainer's model_run artifact


def record_batch_shapes(dataset: tf.data.Dataset, records: list[tuple[int, int, int, int]]) -> tf.data.Dataset:
    """Appends (rows, width, real tokens, texts) of each batch to `records` as the loop takes it, in order, so step
    n's shapes are records[n - 1] whatever the prefetching (packed rows hold several texts: training.packing).
    Hand-written: tf.data has no batch-shape trace."""

    def note(rows, width, real, texts):
        records.append((int(rows), int(width), int(real), int(texts)))
        return rows

    def record(features, label):
        mask = features[ATTENTION_MASK]
        shape = tf.shape(mask, out_type=tf.int64)
        real = tf.reduce_sum(tf.cast(mask, tf.int64))
        texts = tf.shape(label, out_type=tf.int64)[0]
        noted = tf.py_function(note, [shape[0], shape[1], real, texts], tf.int64)
        with tf.control_dependencies([noted]):
            return features, tf.identity(label)

    # The outermost, sequential map: one record per batch the loop takes, in the order it takes them.
    return dataset.map(record)


@dataclasses.dataclass
class TrainingMeter:
    shape: EncoderShape
    peak: MatmulPeak | None  # None where the accelerator's peak is not measured (TPU)
    share: float = 1.0  # of each recorded (global) batch the device the peak is measured on computes
    records: list[tuple[int, ...]] = dataclasses.field(default_factory=list)  # (rows, width, real[, texts])
    seconds: float = 0.0
    steps: int = 0
    padding_one_per_row: float | None = None  # where batches were packed: their padding one text a row (estimated)

    def totals(self, steps: int) -> BatchShapes:
        return BatchShapes.of(self.records[:steps])

    def model_gflops(self, steps: int, seconds: float) -> float:
        """This device's model FLOP/s: its share of the batches' FLOPs."""
        return self.share * self.totals(steps).training_flops(self.shape) / max(seconds, 1e-9) / 1e9

    def describe(self, steps: int, seconds: float) -> str:
        gflops = self.model_gflops(steps, seconds)
        if self.peak is None:
            return f"model {gflops:,.1f} GFLOP/s"
        return f"model {gflops:,.1f} GFLOP/s = {gflops / self.peak.gflops:.0%} of peak"

    def to_json(self) -> dict:
        totals = self.totals(self.steps)
        gflops = self.model_gflops(self.steps, self.seconds)
        return {
            "train_seconds": round(self.seconds, 2),
            "steps": self.steps,
            "examples_per_second": round(totals.examples / max(self.seconds, 1e-9), 2),
            "training_flops": totals.training_flops(self.shape),  # of every device together
            "device_share": self.share,
            "model_gflops_per_second": round(gflops, 2),
            "matmul_peak_gflops": round(self.peak.gflops, 2) if self.peak else None,
            "matmul_peak_dtype": self.peak.dtype if self.peak else None,
            "utilization": round(gflops / self.peak.gflops, 4) if self.peak else None,
            "padding_share": round(totals.padding_share, 4),
            "padding_share_one_per_row": self.padding_one_per_row,  # packed batches': estimated unpacked
            "encoder": dataclasses.asdict(self.shape),
        }

    def write(self, model_run_dir: str) -> None:
        tf.io.gfile.makedirs(model_run_dir)
        with tf.io.gfile.GFile(os.path.join(model_run_dir, THROUGHPUT_FILE), "w") as out:
            json.dump(self.to_json(), out, indent=2)
