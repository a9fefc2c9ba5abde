"""Packing's TensorFlow part (models/training/packing.py says what packing is and chooses it): the rows of a batch,
filled first-fit decreasing (the longest text first, each into the first row with room), in the tf.data pipeline.
Hand-written: tf.data has no packing that keeps each text's label and place, and Keras none at all."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from models.names import (
    ATTENTION_MASK,
    POSITION_IDS,
    SEGMENT_IDS,
    TEXT_LENGTHS,
    TEXT_ROWS,
    TEXT_STARTS,
)


@tf.function(reduce_retracing=True)
def first_fit(lengths: tf.Tensor, width: int) -> tuple[tf.Tensor, tf.Tensor]:
    """Each text's (row, start) [texts] int32: longest first, each into the first row with room for it."""
    lengths = tf.cast(lengths, tf.int32)
    count = tf.shape(lengths)[0]
    order = tf.argsort(lengths, direction="DESCENDING", stable=True)

    def place(i, filled, rows, starts):
        text = order[i]
        row = tf.argmax(tf.cast(filled + lengths[text] <= width, tf.int32), output_type=tf.int32)
        at = [[text]]
        rows = tf.tensor_scatter_nd_update(rows, at, [row])
        starts = tf.tensor_scatter_nd_update(starts, at, [filled[row]])
        return i + 1, tf.tensor_scatter_nd_add(filled, [[row]], [lengths[text]]), rows, starts

    empty = tf.zeros([count], tf.int32)
    _, _, rows, starts = tf.while_loop(lambda i, *_: i < count, place, (0, empty, empty, empty))
    return rows, starts


def pack(features: dict, label, width: int):
    """A batch one text a row ([texts, T], T <= `width`, each text's tokens first) -> its texts packed into rows of
    `width`: every model input [rows, width], plus where each text sits (models/names.py:
    SEGMENT_IDS to TEXT_LENGTHS)."""
    mask = tf.cast(features[ATTENTION_MASK], tf.int32)
    lengths = tf.reduce_sum(mask, axis=1)
    rows, starts = first_fit(lengths, width)
    tokens = tf.cast(tf.where(mask > 0), tf.int32)  # (text, position) of every real token
    text, position = tokens[:, 0], tokens[:, 1]
    into = tf.stack([tf.gather(rows, text), tf.gather(starts, text) + position], axis=1)
    shape = tf.stack([tf.reduce_max(rows) + 1, width])

    def laid(values):
        return tf.scatter_nd(into, values, tf.cast(shape, tf.int32))

    packed = {name: laid(tf.gather_nd(value, tokens)) for name, value in features.items()}
    packed[SEGMENT_IDS] = laid(text + 1)
    packed[POSITION_IDS] = laid(position)
    packed |= {TEXT_ROWS: rows, TEXT_STARTS: starts, TEXT_LENGTHS: lengths}
    return packed, label


def packed_padding(lengths: Sequence[int], batch: int, width: int) -> float:
    """The share of padding in rows of `width` packed from batches of `lengths` (cut to `width`) in a shuffled order,
    as the Trainer draws them (a profile's lengths come sorted, and a batch of alike lengths packs worse than a
    shuffled one)."""
    cut = np.random.default_rng(0).permutation(np.minimum(np.asarray(lengths, np.int32), width))
    rows = 0
    for start in range(0, len(cut), batch):
        rows += int(tf.reduce_max(first_fit(tf.constant(cut[start : start + batch]), width)[0])) + 1
    return 1 - cut.sum() / (rows * width) if rows else 0.0
