"""What every encoder does differently when a batch arrives packed (training.packing: several texts end to end in
each row, models/training/packing.py): a token attends only to the tokens of its own text, positions count from
each text's start, and the head reads each text on its own. The numbers are those of the texts one per row; only
the padding between them is gone."""

from __future__ import annotations

import tensorflow as tf

from models.encoders.attention import padding_mask
from models.names import ATTENTION_MASK, POSITION_IDS, SEGMENT_IDS, TEXT_LENGTHS, TEXT_ROWS, TEXT_STARTS


def is_packed(inputs: dict) -> bool:
    return SEGMENT_IDS in inputs


def allowed_keys(inputs: dict) -> tf.Tensor:
    """Which keys each query may see, as booleans: [B, 1, 1, T] (every real key) one text a row; packed, [B, 1, T, T]
    (the keys of the query's own text: a block-diagonal mask, as large as the scores the whole attention computes)."""
    if not is_packed(inputs):
        return padding_mask(inputs[ATTENTION_MASK])
    segments = inputs[SEGMENT_IDS]
    query, key = segments[:, tf.newaxis, :, tf.newaxis], segments[:, tf.newaxis, tf.newaxis, :]
    return tf.equal(query, key) & (key > 0)


def positions(inputs: dict, width: tf.Tensor) -> tf.Tensor:
    """Each token's position in its text: [T] (0 .. T-1) one text a row, [B, T] packed."""
    return inputs[POSITION_IDS] if is_packed(inputs) else tf.range(width)


def per_text(hidden: tf.Tensor, inputs: dict) -> tuple[tf.Tensor, tf.Tensor]:
    """The encoder's [rows, T, H] output -> ([texts, T, H], [texts, T] attention mask): each text's tokens from the
    start of a row of its own, as the head reads a text one per row (first token, masked mean, every token)."""
    if not is_packed(inputs):
        return hidden, inputs[ATTENTION_MASK]
    width = tf.shape(hidden)[1]
    offsets = tf.range(width)[tf.newaxis, :]
    real = offsets < inputs[TEXT_LENGTHS][:, tf.newaxis]
    columns = tf.minimum(inputs[TEXT_STARTS][:, tf.newaxis] + offsets, width - 1)
    rows = tf.broadcast_to(inputs[TEXT_ROWS][:, tf.newaxis], tf.shape(columns))
    texts = tf.gather_nd(hidden, tf.stack([rows, columns], axis=-1))
    return texts, tf.cast(real, tf.int32)
