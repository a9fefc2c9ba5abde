"""Loss weights per class, from the config and the train split's label counts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import tensorflow as tf

from models.contract import LABEL_FEATURE


def train_label_counts(file_patterns: Sequence[str], num_labels: int) -> list[int]:
    """Examples per label id in the (transformed) train files: the rows the Trainer fits, counted in-graph."""
    files = sorted(f for pattern in file_patterns for f in tf.io.gfile.glob(pattern))
    spec = {LABEL_FEATURE: tf.io.FixedLenFeature([], tf.int64)}
    labels = (
        tf.data.TFRecordDataset(files, compression_type="GZIP")
        .batch(4096)
        .map(lambda records: tf.io.parse_example(records, spec)[LABEL_FEATURE])
    )
    counts = tf.zeros([num_labels], tf.int64)
    for batch in labels:
        counts += tf.math.bincount(batch, minlength=num_labels, maxlength=num_labels, dtype=tf.int64)
    return [int(c) for c in counts.numpy()]


def class_weight_map(
    setting: str | Mapping[str, float], label_names: Sequence[str], counts: Sequence[int] | None
) -> dict[int, float] | None:
    """Keras' class_weight {label id: weight}: None for `none`; `balanced` is scikit-learn's n / (K x n_class)
    (a class absent from train gets 0: it has no examples to weigh); a mapping names labels, the rest weigh 1."""
    if setting == "none":
        return None
    if setting == "balanced":
        total, k = sum(counts), len(label_names)
        return {i: (total / (k * n) if n else 0.0) for i, n in enumerate(counts)}
    return {i: float(setting.get(name, 1.0)) for i, name in enumerate(label_names)}
