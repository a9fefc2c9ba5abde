"""Rotary position embeddings (Su et al. 2021) as transformers computes its default RoPE, shared by the encoders
that use them (ModernBERT, GTE, EuroBERT)."""

from __future__ import annotations

import tensorflow as tf

from models.encoders.layers import UnsupportedConfigError


def default_theta(config: dict, family_default: float) -> float:
    """rope_parameters' theta (transformers 5's key; rope_theta before it), refusing any RoPE scaling: only the
    default rotary positions are computed here."""
    params = {**(config.get("rope_parameters") or {}), **(config.get("rope_scaling") or {})}
    if params.get("rope_type", "default") != "default":
        raise UnsupportedConfigError(f"rope_type '{params['rope_type']}' (only the default rotary positions)")
    return float(params.get("rope_theta", config.get("rope_theta", family_default)))


def rotary_tables(positions: tf.Tensor, head_dim: int, theta: float) -> tuple[tf.Tensor, tf.Tensor]:
    """cos and sin of transformers' default RoPE (frequencies theta^(-2i/D), each used for both halves) at
    `positions`: [T] -> [T, D]; each row's own [B, T] (packed rows: packed_rows.positions) -> [B, 1, T, D]."""
    inv_freq = 1.0 / (theta ** (tf.range(0, head_dim, 2, dtype=tf.float32) / head_dim))
    angles = tf.cast(positions, tf.float32)[..., tf.newaxis] * inv_freq
    angles = tf.concat([angles, angles], axis=-1)
    if positions.shape.rank == 2:
        angles = angles[:, tf.newaxis]
    return tf.cos(angles), tf.sin(angles)


def rotate(x: tf.Tensor, cos: tf.Tensor, sin: tf.Tensor) -> tf.Tensor:
    """x * cos + rotate_half(x) * sin on [B, H, T, D], in float32 as transformers computes it."""
    x32 = tf.cast(x, tf.float32)
    first, second = tf.split(x32, 2, axis=-1)
    return tf.cast(x32 * cos + tf.concat([-second, first], axis=-1) * sin, x.dtype)
