"""Length bucketing keeps every example and label, only cutting padding."""

import numpy as np
import tensorflow as tf

from components.trainer import bucket_by_length


def test_batches_are_cut_to_the_smallest_width_that_holds_them():
    lengths = [5, 30, 40, 12, 64, 8, 33, 20] * 8
    mask = np.array([[1] * n + [0] * (64 - n) for n in lengths], np.int64)
    ids = mask * (np.arange(64) + 1)
    labels = np.arange(len(lengths), dtype=np.int64)
    batched = tf.data.Dataset.from_tensor_slices(({"input_ids": ids, "attention_mask": mask}, labels)).batch(8)
    seen = {}
    for features, label in bucket_by_length(batched, 4, (32,), 64):
        width = features["input_ids"].shape[1]
        longest = int(features["attention_mask"].numpy().sum(axis=1).max())
        assert width == (32 if longest <= 32 else 64)
        for row, lab in zip(features["input_ids"].numpy(), label.numpy(), strict=True):
            seen[int(lab)] = row
    assert sorted(seen) == list(range(len(lengths)))  # nothing lost (64 examples, batches of 4)
    for lab, row in seen.items():
        assert int((row > 0).sum()) == lengths[lab]


def test_no_buckets_leaves_the_dataset_alone():
    dataset = tf.data.Dataset.range(3)
    assert bucket_by_length(dataset, 4, (), 64) is dataset
