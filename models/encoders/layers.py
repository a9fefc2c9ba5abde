"""Building blocks shared by the encoders: PyTorch-named parameters, activations and masked attention.

Every layer an encoder builds is a tf_keras layer (Dense, LayerNormalization, Embedding, Dropout; a few compute
theirs faster or in less memory, under the same variables); what is ours is the name each of its variables has in a
PyTorch state dict, declared where the layer is made, so loading and exporting are one table walked both ways.
tf_keras, not Keras 3: TFT and TFMA load the SavedModel through Keras 2, and Keras 3 SavedModels have a known failure
class in BulkInferrer and serving (tfx#7782, keras#19274).
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
from models.encoders.dropout import Dropout, apply_mask, fresh_seed, keep_mask
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


def _gradient_scope(*inner: str) -> str:
    """The absolute name scope a custom gradient's ops go in: as autodiff names a gradient (gradient_tape/ and the
    forward op's scope, here the current one and `inner`), which is how benchmarks/step_profile.py sorts ops."""
    return "/".join(filter(None, ("gradient_tape", tf.get_current_name_scope(), *inner))) + "/"


def _standardized(x: tf.Tensor, epsilon: float) -> tf.Tensor:
    """(x - mean) / sqrt(variance + epsilon) over the last axis, with its gradient written out:
    (g - mean(g) - n·mean(g·n)) / sqrt(variance + epsilon). TensorFlow's autodiff of tf.nn.moments and
    batch_normalization runs 14 elementwise ops and reductions where this runs 6; a LayerNorm's step (forward and
    backward, 1,280 x 384) takes 2.2 ms instead of 3.2."""

    @tf.custom_gradient
    def computed(x):
        x_ = tf.stop_gradient(x)  # as _keeping_only_the_input: an enclosing tape keeps none of the forward's ops
        gradient_scope = _gradient_scope()
        mean, variance = tf.nn.moments(x_, axes=[-1], keepdims=True)
        inverse_deviation = tf.math.rsqrt(variance + epsilon)
        normalized = (x_ - mean) * inverse_deviation

        def backward(upstream):
            with tf.name_scope(gradient_scope):
                centered = upstream - tf.reduce_mean(upstream, axis=-1, keepdims=True)
                along = tf.reduce_mean(upstream * normalized, axis=-1, keepdims=True)
                return (centered - normalized * along) * inverse_deviation

        return normalized, backward

    return computed(x)


class LayerNorm(tf_keras.layers.LayerNormalization):
    """tf_keras' LayerNormalization over the last axis (its variables, names and float32 statistics under mixed
    precision), normalizing through _standardized. Keras' own fused kernel is no option: it takes epsilon >= 1.001e-5,
    and BERT's is 1e-12."""

    def call(self, inputs):
        if self.axis != [inputs.shape.rank - 1] or not self.scale:
            return super().call(inputs)
        inputs = tf.cast(inputs, self.compute_dtype)
        dtype = inputs.dtype
        mixed = dtype in (tf.float16, tf.bfloat16) and self.dtype == "float32"
        statistics_dtype = tf.float32 if mixed else dtype
        normalized = _standardized(tf.cast(inputs, statistics_dtype), self.epsilon)
        outputs = normalized * tf.cast(self.gamma, statistics_dtype)
        if self.center:
            outputs += tf.cast(self.beta, statistics_dtype)
        return tf.cast(outputs, dtype)


def layer_norm(epsilon: float, name: str, *, center: bool = True) -> tf_keras.layers.LayerNormalization:
    return LayerNorm(epsilon=epsilon, center=center, name=name)


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
    """An elementwise activation whose backward pass keeps its input alone and computes `derivative` from it, both
    passes in `scope` (tf.nn.gelu's own name scope: benchmarks/step_profile.py sorts ops by it).
    tf.nn.gelu is Python arithmetic whose autodiff keeps its intermediates the size of the input (erfc's output, half
    the input, ...): through six GELUs 21 input-sized tensors were live at the peak against 9 (layers_test); MiniLM
    at width 512, batch 32, trains at 6.6 GiB instead of 7.4, as fast."""

    def decorate(activation: Callable[[tf.Tensor], tf.Tensor]) -> Callable[[tf.Tensor], tf.Tensor]:
        @tf.custom_gradient
        def computed(x):
            # from a stopped input: an enclosing tape would keep the forward's ops (long_attention.chunked_attention)
            x_ = tf.stop_gradient(x)
            gradient_scope = _gradient_scope(scope)

            def backward(upstream):
                with tf.name_scope(gradient_scope):
                    return upstream * derivative(x_)

            with tf.name_scope(scope):
                return activation(x_), backward

        return computed

    return decorate


_SQRT_HALF, _INV_SQRT_2PI, _TANH_SCALE, _TANH_CUBIC = (
    0.7071067811865476,
    0.3989422804014327,
    0.7978845608028654,
    0.044715,
)


def _normal_cdf(x: tf.Tensor) -> tf.Tensor:
    """Φ(x) = (1 + erf(x/√2)) / 2, as PyTorch's exact GELU computes it. Not tf.nn.gelu's erfc(-x/√2) / 2: on CPU
    TensorFlow's erfc is 2.5x the time of erf (18 against 7 ms over 12 M floats), and they differ by 4e-7."""
    return 0.5 * (1.0 + tf.math.erf(x * _SQRT_HALF))


def _gelu_and_derivative(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """x·Φ(x) and its derivative Φ(x) + x·φ(x), sharing Φ."""
    cdf = _normal_cdf(x)
    return x * cdf, cdf + x * tf.exp(-0.5 * x * x) * _INV_SQRT_2PI


def _tanh_gelu_and_derivative(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """0.5·x·(1 + tanh(u)), u = k·(x + c·x³), and its derivative, sharing tanh(u)."""
    t = tf.tanh(_TANH_SCALE * (x + _TANH_CUBIC * x * x * x))
    return 0.5 * x * (1 + t), 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _TANH_SCALE * (1 + 3 * _TANH_CUBIC * x * x)


gelu = _keeping_only_the_input(lambda x: _gelu_and_derivative(x)[1], "Gelu")(lambda x: x * _normal_cdf(x))
tanh_gelu = _keeping_only_the_input(lambda x: _tanh_gelu_and_derivative(x)[1], "Gelu")(
    lambda x: tf.nn.gelu(x, approximate=True)
)
# The activations whose output a following matrix computes again in its backward pass (DenseAfterActivation),
# with their derivative at once: ours -> value and derivative.
_RECOMPUTABLE = {gelu: _gelu_and_derivative, tanh_gelu: _tanh_gelu_and_derivative}

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


def _matmul_of_activated(value_and_derivative: Callable[[tf.Tensor], tuple[tf.Tensor, tf.Tensor]]):
    """[..., K] x [K, N] -> act(x) @ kernel as [-1, N] (the caller adds the bias before reshaping: one fused op),
    whose backward pass keeps x and the kernel alone: the kernel's gradient computes act(x) again, with the
    derivative that the input's gradient needs anyway (one elementwise pass)."""

    @tf.custom_gradient
    def computed(x, kernel):
        x_, kernel_ = tf.stop_gradient(x), tf.stop_gradient(kernel)  # stopped: as _keeping_only_the_input says
        gradient_scope = _gradient_scope()

        def flat(t: tf.Tensor) -> tf.Tensor:
            return tf.reshape(t, [-1, t.shape[-1]])

        def backward(upstream):
            with tf.name_scope(gradient_scope):
                # once the gradient arrives (as recomputed_attention: else TensorFlow would merge the recomputation
                # with the forward's, or run it early, and the activation would stay alive after all)
                with tf.name_scope("Gelu"), tf.control_dependencies([upstream]):  # GELU's work in a profile
                    activated, slope = value_and_derivative(tf.identity(x_))
                kernel_gradient = tf.matmul(flat(activated), upstream, transpose_a=True)
                input_gradient = tf.reshape(tf.matmul(upstream, kernel_, transpose_b=True), tf.shape(x_))
                return input_gradient * slope, kernel_gradient

        with tf.name_scope("Gelu"):
            activated = value_and_derivative(x_)[0]
        return tf.matmul(flat(activated), kernel_), backward

    return computed


# Past this size a training step computes a feed-forward's activation again in the backward pass rather than keep it
# (DenseAfterActivation): MiniLM at width 512, batch 32 keeps 100 MB a layer, 0.6 GB of its step, and recomputing it
# costs 3.5% more CPU time a step; the default run's widths (up to 128 tokens: 25 MB a layer) keep it as they were.
RECOMPUTE_ACTIVATION_ABOVE_BYTES = 64 * 2**20


class BoundedWidth:
    """What a layer whose way of computing depends on the batch's size mixes in (those calling scaled_dot_attention,
    DenseAfterActivation): the widest batch it is given and, where rows arrive in numbers known only at run time
    (packed rows), the most; set on every such layer of a model by bound_width (the Trainer: the run's
    max_seq_length and a replica's batch) before its steps and signatures are traced."""

    widest: int | None = None
    most_rows: int | None = None


def activation_recomputed(activation_bytes: int) -> bool:
    """Whether a training step computes a feed-forward's activation of that size again rather than keep it
    (DenseAfterActivation; step_memory counts the same)."""
    return activation_bytes > RECOMPUTE_ACTIVATION_ABOVE_BYTES


class DenseAfterActivation(BoundedWidth, tf_keras.layers.Dense):
    """Dense(act(x)): a feed-forward's second matrix with the activation before it. Where the activation is one of
    _RECOMPUTABLE and what it would keep exceeds RECOMPUTE_ACTIVATION_ABOVE_BYTES at the batch's width (the widest
    batch, bound_width's `widest`, where the width is known only at run time), the backward pass keeps x alone and
    computes act(x) again for the kernel's gradient instead of keeping both. The variables are Dense's, under Dense's
    names."""

    def __init__(self, units: int, before: Callable[[tf.Tensor], tf.Tensor], **kwargs):
        super().__init__(units, **kwargs)
        self.before = before

    def recomputes(self, inputs: tf.Tensor, training) -> bool:
        """Whether this step computes the activation again: in training, past RECOMPUTE_ACTIVATION_ABOVE_BYTES, or
        where the batch's size is not known before it runs."""
        if not training or self.before not in _RECOMPUTABLE:
            return False
        leading = list(inputs.shape[:-1])
        if len(leading) == 2:  # [batch, width, K]: a narrower batch width keeps what the widest would recompute
            leading = [leading[0] or self.most_rows, leading[1] or self.widest]
        if None in leading:
            return True
        return activation_recomputed(math.prod(leading) * inputs.shape[-1] * inputs.dtype.size)

    def call(self, inputs, training=None):
        if not self.recomputes(inputs, training):
            return super().call(self.before(inputs))
        kernel = tf.cast(self.kernel, inputs.dtype)
        outputs = _matmul_of_activated(_RECOMPUTABLE[self.before])(inputs, kernel)
        if self.use_bias:
            outputs = tf.nn.bias_add(outputs, tf.cast(self.bias, outputs.dtype))
        return tf.reshape(outputs, tf.concat([tf.shape(inputs)[:-1], [self.units]], axis=0))


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
# dropped weights: 16 bytes a pair in float32) are recomputed in the backward pass instead of kept. MiniLM at width
# 512, batch 32 keeps 1.6 GB a layer; the default run's widths (up to 64) keep 25 MB and stay as they were.
RECOMPUTE_ABOVE_BYTES = 256 * 2**20


def kept_bytes(shape) -> int | tf.Tensor:
    """What a training step keeps of one layer's [B, H, T, T] attention for the backward pass, from q's shape
    [B, H, T, D] (static, or a tensor where batches are cut to their width)."""
    batch, heads, width = shape[0], shape[1], shape[2]
    return 16 * batch * heads * width * width


def attention_recomputed(shape) -> bool | tf.Tensor:
    """Whether a training step recomputes one layer's attention weights rather than keep them, from q's shape
    [B, H, T, D] (static, or a tensor where batches are cut to their width; step_memory counts the same)."""
    return kept_bytes(shape) > RECOMPUTE_ABOVE_BYTES


@in_attention_scope
def scaled_dot_attention(
    query: tf.Tensor,
    key: tf.Tensor,
    value: tf.Tensor,
    bias: tf.Tensor,
    dropout: Dropout,
    training,
    half_window: int | None = None,
    bounds: BoundedWidth | None = None,
) -> tf.Tensor:
    """softmax(q k^T / sqrt(d) + bias) v over [B, H, T, D]; scores and softmax in float32 under mixed precision,
    as transformers computes them; `half_window`: local attention, a query seeing keys at most that far away.
    Over QUERY_CHUNK tokens it runs in pieces of queries and no [T, T] tensor exists (long_attention.py). Within
    them, a training step whose weights would take more than RECOMPUTE_ABOVE_BYTES keeps only q, k, v and the bias
    for the backward pass (recomputed_attention); else Keras' dropout and autodiff. Where batches are cut to their
    width (the Trainer's buckets, serving's longest text) or arrive in rows counted only at run time (packed), a
    switch_case chooses among the ways the calling layer's `bounds` (BoundedWidth: widest batch, most rows) leave
    possible."""
    arguments = (query, key, value, bias, dropout, training, half_window)
    width = query.shape[2]
    if width is not None and width > long_attention.QUERY_CHUNK:
        return _attention_in_pieces(_pieces_at_static_width(), *arguments)
    if None in query.shape[:3]:
        return _at_run_time_shape(arguments, bounds or BoundedWidth())
    return _whole_attention(*arguments, recompute=bool(training) and attention_recomputed(query.shape))


def _at_run_time_shape(arguments, bounds: BoundedWidth) -> tf.Tensor:
    """scaled_dot_attention's choice made per batch, among the branches that can happen: no op at all where only one
    can (a cond in every layer costs the default run's Trainer 4-5% of its step). One switch_case, not nested conds:
    the gradient of a cond within a cond fails an assertion in cond_v2."""
    query, training, chunk = arguments[0], arguments[5], long_attention.QUERY_CHUNK
    width, widest, rows = query.shape[2], bounds.widest, query.shape[0] or bounds.most_rows
    whole_at_most = min(width or widest or chunk, chunk)
    branches, branch = [lambda: _whole_attention(*arguments, recompute=False)], tf.constant(0)
    if training and (rows is None or attention_recomputed([rows, query.shape[1], whole_at_most])):
        branches.append(lambda: _whole_attention(*arguments, recompute=True))
        branch = tf.cast(attention_recomputed(tf.shape(query, tf.int64)), tf.int32)
    if width is None and (widest is None or widest > chunk):
        branches.append(lambda: _attention_in_pieces(long_attention.looped_attention, *arguments))
        branch = tf.where(tf.shape(query)[2] > chunk, len(branches) - 1, branch)
    return branches[0]() if len(branches) == 1 else tf.switch_case(branch, branches)


def bound_width(model: tf_keras.layers.Layer, widest: int, most_rows: int | None = None) -> None:
    """Every BoundedWidth layer of `model` told the widest batch it will see (and the most rows, where known)."""
    for layer in model.submodules:
        if isinstance(layer, BoundedWidth):
            layer.widest, layer.most_rows = widest, most_rows


def _pieces_at_static_width():
    """long_attention's loop, one piece at a time: at the ModernBERT-base shape and 8,192 tokens a training step
    peaked at 5.9 GiB in 51 s against 8.6 GiB in 55 s for the unrolled pieces (`make bench-encoders`, one process
    each). Under XLA (a TPU, jit_compile) the unrolled pieces: their slices are static, the loop's are not."""
    in_xla = control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())
    return long_attention.chunked_attention if in_xla else long_attention.looped_attention


def _attention_in_pieces(pieces, query, key, value, bias, dropout, training, half_window) -> tf.Tensor:
    """long_attention's looped_attention (or chunked_attention under XLA: _pieces_at_static_width), with Keras'
    dropout rate while training: a stateless mask from one seed, the same forward and backward; no random op where
    nothing is dropped (serving)."""
    rate = float(dropout.rate) if training else 0.0
    seed = fresh_seed() if rate > 0 else None
    return pieces(query, key, value, bias, half_window, seed, rate)


def _whole_attention(query, key, value, bias, dropout, training, half_window, *, recompute: bool) -> tf.Tensor:
    """scaled_dot_attention within QUERY_CHUNK tokens: [B, H, T, T] at once; with `recompute` (a training step that
    would keep more than RECOMPUTE_ABOVE_BYTES) the weights are recomputed in the backward pass instead of kept."""
    if half_window is not None:
        bias = bias + attention_bias(window_mask(tf.shape(query)[2], half_window))
    if recompute:
        seed = fresh_seed()  # the same mask forward and backward
        return recomputed_attention(query, key, value, bias, seed, float(dropout.rate))
    scale = 1.0 / math.sqrt(query.shape[-1])
    scores = tf.cast(tf.matmul(query, key, transpose_b=True), tf.float32) * scale + bias
    weights = tf.cast(tf.nn.softmax(scores, axis=-1), value.dtype)
    return tf.matmul(dropout(weights, training=training), value)


def head_seed(seed: tf.Tensor, head: int) -> tf.Tensor:
    """The stateless dropout seed of one head's weights in recomputed_attention (one mask a head, as it runs them)."""
    return tf.random.experimental.stateless_fold_in(seed, head)


def of_head(t: tf.Tensor, head: int) -> tf.Tensor:
    """[B, H, ...] -> head `head`'s [B, 1, ...]; a tensor shared by the heads ([B|1, 1, ...]: a mask) as it is."""
    return t if t.shape[1] == 1 else t[:, head : head + 1]


def _head_weights(q, k, v, b, seed, rate: float, head: int):
    """One head's softmax probabilities, its dropout mask (None without dropout) and the dropped weights."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    probabilities = tf.nn.softmax(tf.cast(tf.matmul(q, k, transpose_b=True), tf.float32) * scale + b, axis=-1)
    keep = None
    if rate > 0:
        keep = keep_mask(tf.shape(probabilities), head_seed(seed, head), rate)
    weights = probabilities if keep is None else apply_mask(probabilities, keep, rate)
    return probabilities, keep, tf.cast(weights, v.dtype)


def _head_gradients(q, k, v, b, upstream, seed, rate: float, head: int, after: list[tf.Tensor]):
    """One head's d_q, d_k, d_v and bias gradient, its weights recomputed once `after` (the upstream gradient and
    the head before's gradients) exist: without the dependency TensorFlow's executor may recompute every layer's
    weights as soon as q, k and v exist, all of them alive at once."""
    with tf.control_dependencies(after):
        probabilities, keep, weights = _head_weights(tf.identity(q), tf.identity(k), v, b, seed, rate, head)
    d_weights = tf.cast(tf.matmul(upstream, v, transpose_b=True), tf.float32)
    d_v = tf.matmul(weights, upstream, transpose_a=True)
    if keep is not None:
        d_weights = apply_mask(d_weights, keep, rate)
    d_scores = probabilities * (d_weights - tf.reduce_sum(d_weights * probabilities, axis=-1, keepdims=True))
    scale = 1.0 / math.sqrt(q.shape[-1])
    d_q = tf.matmul(tf.cast(d_scores * scale, q.dtype), k)
    d_k = tf.matmul(tf.cast(d_scores * scale, k.dtype), q, transpose_a=True)
    return d_q, d_k, d_v, _sum_to_shape(d_scores, b)


def recomputed_attention(query, key, value, bias, seed, rate: float) -> tf.Tensor:
    """Attention whose [B, H, T, T] weights live only while their layer runs: the backward pass recomputes them
    from q, k, v, the bias and the dropout seed (a stateless mask, so the same one), so a training step keeps
    O(T) per layer instead of O(T^2). One head at a time, both ways: one head's weights and their gradients alive
    instead of every head's (MiniLM at width 512, batch 32: 134 MB against 1.6 GB). Hand-written because neither
    TensorFlow nor tf_keras has a memory-efficient attention for CPUs; tf.recompute_grad would draw a different
    dropout mask on recomputation."""
    heads = query.shape[1]

    @tf.custom_gradient
    def attend(q, k, v, b):
        # from stopped inputs, or an enclosing GradientTape records these ops and keeps their weights; the backward
        # pass reads them too (long_attention.chunked_attention says why)
        q_, k_, v_, b_ = (tf.stop_gradient(t) for t in (q, k, v, b))
        outputs = []
        for head in range(heads):
            with tf.control_dependencies(outputs[-1:]):  # after the head before: one head's weights at a time
                _, _, weights = _head_weights(*(of_head(t, head) for t in (q_, k_, v_, b_)), seed, rate, head)
                outputs.append(tf.matmul(weights, of_head(v_, head)))

        def backward(upstream):
            gradients = []
            for head in range(heads):
                parts = (of_head(t, head) for t in (q_, k_, v_, b_, upstream))
                after = [upstream, *(gradients[-1] if gradients else [])]
                gradients.append(_head_gradients(*parts, seed, rate, head, after))
            d_q, d_k, d_v, d_b = ([g[i] for g in gradients] for i in range(4))
            shared_bias = b_.shape[1] == 1  # every head's gradient adds up in it
            d_b = tf.add_n(d_b) if shared_bias else tf.concat(d_b, axis=1)
            return tf.concat(d_q, axis=1), tf.concat(d_k, axis=1), tf.concat(d_v, axis=1), d_b

        return tf.concat(outputs, axis=1), backward

    return attend(query, key, value, bias)


def _sum_to_shape(gradient: tf.Tensor, like: tf.Tensor) -> tf.Tensor:
    """The gradient of a broadcast input: summed over the axes it was broadcast along ([B|1, H|1, T|1, T])."""
    axes = [i for i in range(4) if like.shape[i] == 1]
    return tf.reshape(tf.reduce_sum(gradient, axis=axes, keepdims=True), tf.shape(like)) if axes else gradient


def run_block(block, x: tf.Tensor, *args, training, recompute: bool) -> tf.Tensor:
    """One block's forward pass; with `recompute` (in training) the step keeps only the block's input for the
    backward pass, which runs the block again (tf.recompute_grad): one block's activations alive instead of every
    block's, for about a third more compute. Exact only where the block draws no random numbers (its dropout at 0:
    the recomputation would draw other masks), when the Trainer chooses it (classifier.can_recompute_blocks)."""
    if not (recompute and training):
        return block(x, *args, training=training)
    return tf.recompute_grad(lambda inner: block(inner, *args, training=training))(x)
