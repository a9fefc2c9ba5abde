"""Building blocks shared by the encoders: PyTorch-named parameters, activations and masked attention.

Every layer an encoder builds is a stock tf_keras layer (Dense, LayerNormalization, Embedding, Dropout); what is
ours is the name each of its variables has in a PyTorch state dict, declared where the layer is made, so loading
and exporting are one table walked both ways. tf_keras, not Keras 3: TFT and TFMA load the SavedModel through
Keras 2, and Keras 3 SavedModels have a known failure class in BulkInferrer and serving (tfx#7782, keras#19274).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator

import tensorflow as tf
import tf_keras

from models.errors import UserError


@dataclasses.dataclass(frozen=True)
class TorchParam:
    """One variable under its PyTorch name; `transpose` for nn.Linear weights ([out, in] there, [in, out] here)."""

    name: str
    variable: tf.Variable
    transpose: bool = False


def truncated_normal(std: float) -> tf_keras.initializers.Initializer:
    """transformers' init for weights a checkpoint lacks (a new head): a normal cut at two standard deviations."""
    return tf_keras.initializers.TruncatedNormal(stddev=std)


def dense(units: int, name: str, *, use_bias: bool = True, std: float = 0.02) -> tf_keras.layers.Dense:
    return tf_keras.layers.Dense(units, use_bias=use_bias, kernel_initializer=truncated_normal(std), name=name)


def layer_norm(epsilon: float, name: str, *, center: bool = True) -> tf_keras.layers.LayerNormalization:
    """A LayerNorm whose variables carry "LayerNorm" in their names: the optimizer leaves what matches it (and
    biases) out of weight decay, as transformers' create_optimizer and Trainer do."""
    keras_name = name if "LayerNorm" in name or "layer_norm" in name else f"{name}_LayerNorm"
    return tf_keras.layers.LayerNormalization(epsilon=epsilon, center=center, name=keras_name)


def dense_params(name: str, layer: tf_keras.layers.Dense) -> Iterator[TorchParam]:
    yield TorchParam(f"{name}.weight", layer.kernel, transpose=True)
    if layer.use_bias:
        yield TorchParam(f"{name}.bias", layer.bias)


def norm_params(name: str, layer: tf_keras.layers.LayerNormalization) -> Iterator[TorchParam]:
    yield TorchParam(f"{name}.weight", layer.gamma)
    if layer.center:
        yield TorchParam(f"{name}.bias", layer.beta)


def embedding_params(name: str, layer: tf_keras.layers.Embedding) -> Iterator[TorchParam]:
    yield TorchParam(f"{name}.weight", layer.embeddings)


# transformers' ACT2FN names -> TensorFlow; "gelu" is the exact (erf) GELU there, the tanh forms are approximations.
ACTIVATIONS: dict[str, Callable[[tf.Tensor], tf.Tensor]] = {
    "gelu": lambda x: tf.nn.gelu(x, approximate=False),
    "gelu_new": lambda x: tf.nn.gelu(x, approximate=True),
    "gelu_pytorch_tanh": lambda x: tf.nn.gelu(x, approximate=True),
    "gelu_fast": lambda x: tf.nn.gelu(x, approximate=True),
    "relu": tf.nn.relu,
    "silu": tf.nn.silu,
    "swish": tf.nn.silu,
    "tanh": tf.math.tanh,
}


class UnsupportedConfigError(UserError, ValueError):
    """The checkpoint's config.json asks for something this encoder does not compute; the message says what."""


def activation(name: str) -> Callable[[tf.Tensor], tf.Tensor]:
    if name not in ACTIVATIONS:
        raise UnsupportedConfigError(f"activation '{name}' is not one of {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def split_heads(x: tf.Tensor, heads: int) -> tf.Tensor:
    """[B, T, H x D] -> [B, H, T, D]."""
    batch, width = tf.shape(x)[0], tf.shape(x)[1]
    return tf.transpose(tf.reshape(x, [batch, width, heads, x.shape[-1] // heads]), [0, 2, 1, 3])


def merge_heads(x: tf.Tensor) -> tf.Tensor:
    """[B, H, T, D] -> [B, T, H x D]."""
    batch, width = tf.shape(x)[0], tf.shape(x)[2]
    return tf.reshape(tf.transpose(x, [0, 2, 1, 3]), [batch, width, x.shape[1] * x.shape[3]])


def attention_bias(allowed: tf.Tensor) -> tf.Tensor:
    """A boolean [B, 1|H, T, T] mask -> what is added to float32 scores: 0 where allowed, a large negative elsewhere
    (not -inf: a row that allows nothing, which padding never makes here, would be NaN)."""
    return tf.where(allowed, 0.0, -1e9)


def padding_mask(attention_mask: tf.Tensor) -> tf.Tensor:
    """[B, T] of 1/0 -> [B, 1, 1, T] booleans: every query may see each real key."""
    return tf.cast(attention_mask, tf.bool)[:, tf.newaxis, tf.newaxis, :]


def window_mask(width: tf.Tensor, half_window: int) -> tf.Tensor:
    """[1, 1, T, T]: a query sees the keys at most `half_window` positions away (ModernBERT's local attention, as
    transformers' sliding_window_bidirectional_overlay: |q - k| <= half window)."""
    positions = tf.range(width)
    distance = tf.abs(positions[:, tf.newaxis] - positions[tf.newaxis, :])
    return (distance <= half_window)[tf.newaxis, tf.newaxis]


def scaled_dot_attention(
    query: tf.Tensor, key: tf.Tensor, value: tf.Tensor, bias: tf.Tensor, dropout: tf_keras.layers.Dropout, training
) -> tf.Tensor:
    """softmax(q k^T / sqrt(d) + bias) v over [B, H, T, D]; scores and softmax in float32 under mixed precision,
    as transformers computes them."""
    scale = 1.0 / math.sqrt(query.shape[-1])
    scores = tf.cast(tf.matmul(query, key, transpose_b=True), tf.float32) * scale + bias
    weights = tf.cast(tf.nn.softmax(scores, axis=-1), value.dtype)
    return tf.matmul(dropout(weights, training=training), value)
