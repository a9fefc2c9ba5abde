"""Packed batches (`training.packing`): a training batch's texts laid end to end in rows of the run's width, so the
step computes on almost no padding, with the same texts, labels and loss as the batch one text a row.

The encoders read packed rows as the texts apart (models/encoders/packed_rows.py: a block-diagonal attention mask,
positions from each text's start, the head on each text): the same numbers, so training differs from the unpacked
one only in the padding it no longer computes. The number of rows changes from batch to batch; the exported model
and validation stay one text a row.

Rows are filled first-fit decreasing (the longest text first, each into the first row with room): within a few
tokens of the fewest rows for a batch of short texts. Hand-written: tf.data has no packing that keeps each text's
label and place, and Keras none at all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Literal

import numpy as np
import tensorflow as tf

from models.errors import UserError
from models.names import (
    ATTENTION_MASK,
    POSITION_IDS,
    SEGMENT_IDS,
    TEXT_LENGTHS,
    TEXT_ROWS,
    TEXT_STARTS,
)


class PackingError(UserError, ValueError):
    """training.packing: true where the run cannot pack; the message says why and what to set."""


Packing = Literal["auto", True, False]
PACKING_GAIN = 0.05  # auto packs where it removes at least this share of the trained tokens (padding)
# Packed rows attend whole: [rows, heads, T, T] scores, which the block-diagonal mask matches in size. Past this
# width attention runs in pieces (models/encoders/long_attention.py, QUERY_CHUNK) where a [T, T] mask would be the
# largest tensor of the step, and long texts fill their rows anyway.
WIDEST_PACKED = 512


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
    `width`: every model input [rows, width], plus where each text sits (models/names.py: PACKED_FEATURES)."""
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


@dataclasses.dataclass(frozen=True)
class PackingChoice:
    packed: bool
    reason: str
    padding_before: float  # share of the trained tokens, one text a row at the batch widths
    padding_after: float | None = None  # packed, where it was estimated

    def describe(self) -> str:
        if not self.packed:
            return f"packing off ({self.reason}): {self.padding_before:.0%} of the trained tokens are padding"
        return (
            f"packing on ({self.reason}): {self.padding_before:.0%} of the trained tokens padding one text a row, "
            f"{self.padding_after:.0%} packed"
        )


def choose_packing(
    requested: Packing,
    lengths: Sequence[int],
    batch: int,
    width: int,
    padding_before: float,
    *,
    cannot: str | None = None,
) -> PackingChoice:
    """training.packing as set, or for `auto` on where the packed rows would carry at least PACKING_GAIN less padding
    than the batch widths do. `cannot`: why this run cannot pack (several replicas split each batch, windows, a
    width past WIDEST_PACKED); with `true`, a PackingError naming it and what to set."""
    if requested is False:
        return PackingChoice(False, "training.packing: false", padding_before)
    if requested is True and cannot is not None:
        raise PackingError(f"training.packing: true, but {cannot}; set training.packing to auto or false")
    if cannot is not None:
        return PackingChoice(False, cannot, padding_before)
    after = packed_padding(lengths, batch, width)
    if requested is True:
        return PackingChoice(True, "training.packing: true", padding_before, after)
    if padding_before - after >= PACKING_GAIN:
        return PackingChoice(True, f"auto: saves over {PACKING_GAIN:.0%} of the tokens", padding_before, after)
    return PackingChoice(False, f"auto: it would save under {PACKING_GAIN:.0%} of the tokens", padding_before, after)


def why_not_packed(*, replicas: int, windows: bool, width: int, fixed_shapes: bool = False) -> str | None:
    """Why a run cannot pack its batches, or None: the facts every caller (the preflight, the Trainer) has."""
    if fixed_shapes:
        return "a TPU compiles one program per shape, and packed batches vary in rows"
    if replicas > 1:
        return f"{replicas} replicas each take a piece of every batch, which packed rows cannot be cut into"
    if windows:
        return "model.long_texts: windows trains each window as an example already filling its row"
    if width > WIDEST_PACKED:
        return f"width {width} attends in pieces, where a packed row's mask would be the step's largest tensor"
    return None
