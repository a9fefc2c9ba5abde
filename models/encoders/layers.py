"""Building blocks shared by the encoders: PyTorch-named parameters, activations and masked attention.

Every layer an encoder builds is a stock tf_keras layer (Dense, LayerNormalization, Embedding, Dropout); what is
ours is the name each of its variables has in a PyTorch state dict, declared where the layer is made, so loading
and exporting are one table walked both ways. tf_keras, not Keras 3: TFT and TFMA load the SavedModel through
Keras 2, and Keras 3 SavedModels have a known failure class in BulkInferrer and serving (tfx#7782, keras#19274).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Iterator

import tensorflow as tf
import tf_keras
from tensorflow.python.ops import control_flow_util  # no public way to ask whether XLA compiles this graph

from models.encoders import long_attention
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


def embedding(rows: int, width: int, name: str, *, std: float = 0.02) -> tf_keras.layers.Embedding:
    return tf_keras.layers.Embedding(rows, width, embeddings_initializer=truncated_normal(std), name=name)


def layer_norm(epsilon: float, name: str, *, center: bool = True) -> tf_keras.layers.LayerNormalization:
    return tf_keras.layers.LayerNormalization(epsilon=epsilon, center=center, name=name)


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


def _keeping_only_the_input(derivative: Callable[[tf.Tensor], tf.Tensor], scope: str):
    """An elementwise activation whose backward pass keeps its input alone and computes `derivative` from it, in
    `scope` (tf.nn.gelu's own name scope: benchmarks/step_profile.py sorts ops by it).
    tf.nn.gelu is Python arithmetic whose autodiff keeps its intermediates the size of the input (erfc's output, half
    the input, ...): through six GELUs 21 input-sized tensors were live at the peak against 9 (layers_test); MiniLM
    at width 512, batch 32, trains at 6.6 GiB instead of 7.4, as fast."""

    def decorate(activation: Callable[[tf.Tensor], tf.Tensor]) -> Callable[[tf.Tensor], tf.Tensor]:
        @tf.custom_gradient
        def computed(x):
            # from a stopped input: an enclosing tape would keep the forward's ops (long_attention.chunked_attention)
            x_ = tf.stop_gradient(x)
            # named as autodiff names a gradient (gradient_tape/ and the forward op's scope): how a profile sorts ops
            gradient_scope = "/".join(filter(None, ("gradient_tape", tf.get_current_name_scope(), scope))) + "/"

            def backward(upstream):
                with tf.name_scope(gradient_scope):
                    return upstream * derivative(x_)

            return activation(x_), backward

        return computed

    return decorate


_SQRT_HALF, _INV_SQRT_2PI, _TANH_SCALE, _TANH_CUBIC = (
    0.7071067811865476,
    0.3989422804014327,
    0.7978845608028654,
    0.044715,
)


def _gelu_derivative(x: tf.Tensor) -> tf.Tensor:
    """d/dx x·Φ(x) = Φ(x) + x·φ(x)."""
    return 0.5 * tf.math.erfc(-x * _SQRT_HALF) + x * tf.exp(-0.5 * x * x) * _INV_SQRT_2PI


def _tanh_gelu_derivative(x: tf.Tensor) -> tf.Tensor:
    """d/dx 0.5·x·(1 + tanh(u)), u = k·(x + c·x³)."""
    t = tf.tanh(_TANH_SCALE * (x + _TANH_CUBIC * x * x * x))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _TANH_SCALE * (1 + 3 * _TANH_CUBIC * x * x)


gelu = _keeping_only_the_input(_gelu_derivative, "Gelu")(lambda x: tf.nn.gelu(x, approximate=False))
tanh_gelu = _keeping_only_the_input(_tanh_gelu_derivative, "Gelu")(lambda x: tf.nn.gelu(x, approximate=True))

# transformers' ACT2FN names -> TensorFlow; "gelu" is the exact (erf) GELU there, the tanh forms are approximations.
ACTIVATIONS: dict[str, Callable[[tf.Tensor], tf.Tensor]] = {
    "gelu": gelu,
    "gelu_new": tanh_gelu,
    "gelu_pytorch_tanh": tanh_gelu,
    "gelu_fast": tanh_gelu,
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


# The name scope of attention's own ops (head transposes, mask, scale, softmax): how a step's profile finds them
# (benchmarks/step_profile.py).
ATTENTION_SCOPE = "attention_core"


def in_attention_scope(function):
    """`function`'s ops under ATTENTION_SCOPE."""

    @functools.wraps(function)
    def scoped(*args, **kwargs):
        with tf.name_scope(ATTENTION_SCOPE):
            return function(*args, **kwargs)

    return scoped


@in_attention_scope
def split_heads(x: tf.Tensor, heads: int) -> tf.Tensor:
    """[B, T, H x D] -> [B, H, T, D]."""
    batch, width = tf.shape(x)[0], tf.shape(x)[1]
    return tf.transpose(tf.reshape(x, [batch, width, heads, x.shape[-1] // heads]), [0, 2, 1, 3])


@in_attention_scope
def merge_heads(x: tf.Tensor) -> tf.Tensor:
    """[B, H, T, D] -> [B, T, H x D]."""
    batch, width = tf.shape(x)[0], tf.shape(x)[2]
    return tf.reshape(tf.transpose(x, [0, 2, 1, 3]), [batch, width, x.shape[1] * x.shape[3]])


@in_attention_scope
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


# Past this size, one layer's attention weights and what their backward pass needs (scores, softmax, dropout mask,
# dropped weights: 16 bytes a pair in float32) are not kept: attention runs in pieces of queries, each piece's
# weights within this size and recomputed in the backward pass. MiniLM at width 512, batch 32 would keep 1.6 GB a
# layer (pieces of 80 queries: 0.25); the default run's widths (up to 64) keep 25 MB and stay as they were.
RECOMPUTE_ABOVE_BYTES = 256 * 2**20


def kept_bytes(shape) -> int | tf.Tensor:
    """What a training step keeps of one layer's [B, H, T, T] attention for the backward pass, from q's shape
    [B, H, T, D] (static, or a tensor where batches are cut to their width)."""
    batch, heads, width = shape[0], shape[1], shape[2]
    return 16 * batch * heads * width * width


def piece_rows(batch: int | None, heads: int, width: int) -> int:
    """Queries a piece of attention takes at `width` keys: as many as keep its weights and their gradients within
    RECOMPUTE_ABOVE_BYTES (a multiple of 16, at least 16), at most QUERY_CHUNK (QUERY_CHUNK with a batch of unknown
    size). The ModernBERT-base shape at 8,192 tokens, batch 1: 160; MiniLM at 512, batch 32: 80."""
    if batch is None:
        return long_attention.QUERY_CHUNK
    rows = RECOMPUTE_ABOVE_BYTES // (16 * batch * heads * width) // 16 * 16
    return min(long_attention.QUERY_CHUNK, max(16, rows))


@in_attention_scope
def scaled_dot_attention(
    query: tf.Tensor,
    key: tf.Tensor,
    value: tf.Tensor,
    bias: tf.Tensor,
    dropout: tf_keras.layers.Dropout,
    training,
    half_window: int | None = None,
    widest: int | None = None,
) -> tf.Tensor:
    """softmax(q k^T / sqrt(d) + bias) v over [B, H, T, D]; scores and softmax in float32 under mixed precision,
    as transformers computes them; `half_window`: local attention, a query seeing keys at most that far away.
    Over QUERY_CHUNK tokens, and in a training step whose weights would take more than RECOMPUTE_ABOVE_BYTES, it runs
    in pieces of queries (piece_rows) recomputed in the backward pass, and no [T, T] tensor exists
    (long_attention.py); else at once, with Keras' dropout and autodiff."""
    arguments = (query, key, value, bias, dropout, training, half_window)
    batch, heads, width = query.shape[:3]
    if width is None:
        return _at_run_time_width(arguments, widest)
    too_much = bool(training) and batch is not None and kept_bytes(query.shape) > RECOMPUTE_ABOVE_BYTES
    if width <= long_attention.QUERY_CHUNK and not too_much:
        return _whole_attention(*arguments)
    return _attention_in_pieces(_pieces_at_static_width(), *arguments, rows=piece_rows(batch, heads, width))


def _at_run_time_width(arguments, widest: int | None) -> tf.Tensor:
    """scaled_dot_attention where batches are cut to their width (the Trainer's buckets, serving's longest text):
    a tf.cond per batch, where `widest` (the widest batch the model is given: BoundedWidth) leaves both ways possible;
    none where it does not (a cond in every layer costs the default run's Trainer 4-5% of its step)."""
    query, training, chunk = arguments[0], arguments[5], long_attention.QUERY_CHUNK
    batch, heads = query.shape[:2]
    whole_at_most = min(widest or chunk, chunk)
    too_much = bool(training) and (batch is None or kept_bytes([batch, heads, whole_at_most]) > RECOMPUTE_ABOVE_BYTES)
    if not too_much and widest is not None and widest <= chunk:
        return _whole_attention(*arguments)
    run_time = tf.shape(query, tf.int64)
    in_pieces = run_time[2] > chunk
    if too_much:
        in_pieces = tf.logical_or(in_pieces, kept_bytes(run_time) > RECOMPUTE_ABOVE_BYTES)
    rows = piece_rows(batch, heads, widest or chunk)
    return tf.cond(
        in_pieces,
        lambda: _attention_in_pieces(long_attention.looped_attention, *arguments, rows=rows),
        lambda: _whole_attention(*arguments),
    )


class BoundedWidth:
    """What a layer calling scaled_dot_attention mixes in: the widest batch it is given, set on every such layer of a
    model by bound_width (the Trainer: the run's max_seq_length) before its steps and signatures are traced."""

    widest: int | None = None


def bound_width(model: tf_keras.layers.Layer, widest: int) -> None:
    """Every BoundedWidth layer of `model` told the widest batch it will see."""
    for layer in model.submodules:
        if isinstance(layer, BoundedWidth):
            layer.widest = widest


def _pieces_at_static_width():
    """long_attention's loop, one piece at a time: at the ModernBERT-base shape and 8,192 tokens, pieces of 512
    queries, a training step peaked at 5.9 GiB in 51 s against 8.6 GiB in 55 s unrolled (`make bench-encoders`, one
    process each). Under XLA (a TPU, jit_compile) the unrolled pieces: their slices are static, the loop's are not."""
    in_xla = control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())
    return long_attention.chunked_attention if in_xla else long_attention.looped_attention


def _attention_in_pieces(pieces, query, key, value, bias, dropout, training, half_window, *, rows: int) -> tf.Tensor:
    """long_attention's chunked_attention (under XLA) or looped_attention, in pieces of `rows` queries, with Keras'
    dropout rate while training: a stateless mask from one seed, the same forward and backward; no random op where
    nothing is dropped (serving)."""
    rate = float(dropout.rate) if training else 0.0
    seed = tf.random.uniform([2], maxval=2**31 - 1, dtype=tf.int32) if rate > 0 else None
    return pieces(query, key, value, bias, half_window, seed, rate, chunk=rows)


def _whole_attention(query, key, value, bias, dropout, training, half_window) -> tf.Tensor:
    """scaled_dot_attention at once: [B, H, T, T] weights, kept for the backward pass by autodiff."""
    if half_window is not None:
        bias = bias + attention_bias(window_mask(tf.shape(query)[2], half_window))
    scale = 1.0 / math.sqrt(query.shape[-1])
    scores = tf.cast(tf.matmul(query, key, transpose_b=True), tf.float32) * scale + bias
    weights = tf.cast(tf.nn.softmax(scores, axis=-1), value.dtype)
    return tf.matmul(dropout(weights, training=training), value)


def run_block(block, x: tf.Tensor, *args, training, recompute: bool) -> tf.Tensor:
    """One block's forward pass; with `recompute` (in training) the step keeps only the block's input for the
    backward pass, which runs the block again (tf.recompute_grad): one block's activations alive instead of every
    block's, for about a third more compute. Exact only where the block draws no random numbers (its dropout at 0:
    the recomputation would draw other masks), when the Trainer chooses it (classifier.can_recompute_blocks)."""
    if not (recompute and training):
        return block(x, *args, training=training)
    return tf.recompute_grad(lambda inner: block(inner, *args, training=training))(x)
