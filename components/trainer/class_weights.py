"""Loss weights per class, from the config and the train split's label counts."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import tensorflow as tf

from models.names import LABEL_FEATURE, TRUNCATED
from models.training.config import TrainingConfig


@dataclasses.dataclass(frozen=True)
class LabelCounts:
    rows: int
    tagged: list[int]  # rows per label id (single label: its class; multi-label: rows tagged with it)
    truncated: int = 0  # rows whose text was cut to model.max_seq_length

    @property
    def truncated_share(self) -> float:
        return self.truncated / self.rows if self.rows else 0.0


def train_label_counts(file_patterns: Sequence[str], num_labels: int, multi_label: bool = False) -> LabelCounts:
    """Rows per label id in the (transformed) train files, and those cut to the width: the rows the Trainer fits,
    counted in-graph."""
    files = sorted(f for pattern in file_patterns for f in tf.io.gfile.glob(pattern))
    spec = {
        LABEL_FEATURE: tf.io.FixedLenFeature([num_labels] if multi_label else [], tf.int64),
        TRUNCATED: tf.io.FixedLenFeature([], tf.int64, default_value=0),  # windowed texts carry none
    }
    parsed = tf.data.TFRecordDataset(files, compression_type="GZIP").batch(4096).map(
        lambda records: tf.io.parse_example(records, spec)
    )
    rows, tagged, truncated = 0, tf.zeros([num_labels], tf.int64), 0
    for batch in parsed:
        labels = batch[LABEL_FEATURE]
        rows += int(tf.shape(labels)[0])
        truncated += int(tf.reduce_sum(batch[TRUNCATED]))
        if multi_label:
            tagged += tf.reduce_sum(labels, axis=0)
        else:
            tagged += tf.math.bincount(labels, minlength=num_labels, maxlength=num_labels, dtype=tf.int64)
    return LabelCounts(rows, [int(c) for c in tagged.numpy()], truncated)


def class_weight_map(
    setting: str | Mapping[str, float],
    label_names: Sequence[str],
    counts: LabelCounts | None,
    multi_label: bool = False,
) -> dict[int, float] | None:
    """{label id: weight}: None for `none`; a mapping names labels, the rest weigh 1. `balanced`: for one label
    per row scikit-learn's n / (K x n_class), Keras' class_weight; for multi-label each label's positive weight
    n_untagged / n_tagged (the pos_weight of weighted cross-entropy). A label absent from train gets 0."""
    if setting == "none":
        return None
    if setting != "balanced":
        return {i: float(setting.get(name, 1.0)) for i, name in enumerate(label_names)}
    if multi_label:
        return {i: ((counts.rows - n) / n if n else 0.0) for i, n in enumerate(counts.tagged)}
    k = len(label_names)
    return {i: (counts.rows / (k * n) if n else 0.0) for i, n in enumerate(counts.tagged)}


def chosen_class_weights(
    training: TrainingConfig, label_names: list[str], train: LabelCounts, multi_label: bool = False
) -> dict[int, float] | None:
    """{label id: weight} for training.class_weights; `balanced` from the train split's label counts. Single
    label: Keras' class_weight. Multi-label: each label's positive weight in the loss."""
    counts = train if training.class_weights == "balanced" else None
    weights = class_weight_map(training.class_weights, label_names, counts, multi_label)
    if weights is not None:
        shown = ", ".join(f"{label_names[i]} {w:.3f}" for i, w in weights.items())
        counted = f" (train counts {dict(zip(label_names, counts.tagged, strict=True))})" if counts else ""
        kind = "positive weights per label" if multi_label else "class weights"
        print(f"[Trainer] {kind} {shown}{counted}", flush=True)
    return weights
