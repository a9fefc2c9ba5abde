"""The one attention core every family calls: softmax(q k^T / sqrt(d) + bias) v, whole, in pieces of queries past
long_attention.QUERY_CHUNK, or with its weights recomputed in the backward pass; the masks and head layout around it.
A family with another scale or extra scores passes them in: DeBERTa's disentangled scores are its bias."""

from __future__ import annotations

import functools
import math

import tensorflow as tf
from tensorflow.python.ops import control_flow_util  # no public way to ask whether XLA compiles this graph

from models.encoders import long_attention
from models.encoders.dropout import Dropout, apply_mask, fresh_seed, keep_mask
from models.encoders.layers import BoundedWidth

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
