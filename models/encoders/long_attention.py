"""Attention over long widths in pieces of queries, so no [T, T] tensor ever exists, forward or backward.

Each piece of QUERY_CHUNK queries attends to its keys: all of them for global attention, only those within the
window for local (sliding-window) attention, whose band is computed from positions rather than read from a [T, T]
mask. Softmax runs over a query's keys whole, so the numbers are full attention's. The backward pass recomputes each
piece's weights once its gradient arrives (the same dropout mask: stateless, seeded per piece), so training keeps
q, k, v and the bias, O(T) per layer; FLOPs are O(T^2) for global layers and O(T x window) for local ones.
Hand-written because neither TensorFlow nor tf_keras has a memory-efficient attention for CPUs (TF's flash
attention kernels are GPU-only), and tf.recompute_grad would draw other dropout masks on recomputation.
"""

from __future__ import annotations

import math

import tensorflow as tf

from models.encoders.dropout import apply_mask, keep_mask

QUERY_CHUNK = 512  # queries a piece: [B, H, 512, T] float32 weights, 192 MiB at ModernBERT-base's 12 heads and 8,192
_MASKED = -1e9  # what attention_bias adds where a key is not allowed (models/encoders/attention.py)


def chunks(width: int, chunk: int, half_window: int | None) -> list[tuple[int, int, int, int]]:
    """(query start, query end, key start, key end) of each piece: every key, or those a window away at most."""
    pieces = []
    for start in range(0, width, chunk):
        end = min(width, start + chunk)
        keys = (0, width) if half_window is None else (max(0, start - half_window), min(width, end + half_window))
        pieces.append((start, end, *keys))
    return pieces


def piece_at(index: tf.Tensor, width: tf.Tensor, chunk: int, half_window: int | None) -> tuple[tf.Tensor, ...]:
    """chunks' piece number `index` at a width known only at run time: the same bounds, as scalar tensors."""
    start = index * chunk
    end = tf.minimum(width, start + chunk)
    if half_window is None:
        return start, end, 0, width
    return start, end, tf.maximum(0, start - half_window), tf.minimum(width, end + half_window)


def _piece_probabilities(q, k, bias, piece, half_window: int | None, scale: float) -> tf.Tensor:
    """softmax over a piece's keys of its queries' scores plus bias (and band): [B, H, queries, keys] float32."""
    start, end, key_start, key_end = piece
    scores = tf.cast(tf.matmul(q[:, :, start:end], k[:, :, key_start:key_end], transpose_b=True), tf.float32)
    return tf.nn.softmax(scores * scale + _piece_bias(bias, piece, half_window), axis=-1)


def _piece_bias(bias: tf.Tensor, piece, half_window: int | None) -> tf.Tensor:
    """The bias of a piece's query rows and key columns, plus its band where the attention is local."""
    start, end, key_start, key_end = piece
    rows = bias if bias.shape[2] == 1 else bias[:, :, start:end]
    sliced = rows[..., key_start:key_end]
    if half_window is None:
        return sliced
    distance = tf.abs(tf.range(start, end)[:, tf.newaxis] - tf.range(key_start, key_end)[tf.newaxis, :])
    return sliced + tf.where(distance <= half_window, 0.0, _MASKED)[tf.newaxis, tf.newaxis]


def _piece_weights(q, k, v, bias, piece, index, half_window: int | None, scale: float, seed, rate: float):
    """A piece's (probabilities, dropout's keep mask or None, dropped weights in v's dtype). The mask is stateless,
    drawn from `seed` and the piece's number: the backward pass draws the same one."""
    probabilities = _piece_probabilities(q, k, bias, piece, half_window, scale)
    keep = None
    if rate > 0:
        keep = keep_mask(tf.shape(probabilities), seed + tf.stack([0, index]), rate)
    weights = probabilities if keep is None else apply_mask(probabilities, keep, rate)
    return probabilities, keep, tf.cast(weights, v.dtype)


def _piece_gradients(q, k, bias, piece, width, probabilities, keep, d_weights, rate: float, scale: float):
    """A piece's d_q, and its parts of d_k (padded to the width) and of the bias' gradient, from its recomputed
    probabilities and the gradient of its dropped weights (`d_weights`, float32)."""
    start, end, key_start, key_end = piece
    if keep is not None:
        d_weights = apply_mask(d_weights, keep, rate)
    d_scores = probabilities * (d_weights - tf.reduce_sum(d_weights * probabilities, axis=-1, keepdims=True))
    d_q = tf.matmul(tf.cast(d_scores * scale, q.dtype), k[:, :, key_start:key_end])
    d_k = tf.matmul(tf.cast(d_scores * scale, k.dtype), q[:, :, start:end], transpose_a=True)
    return (
        d_q,
        _at_keys(d_k, key_start, key_end, width),
        _bias_gradient_of_piece(d_scores, bias, key_start, width - key_end),
    )


def _at_keys(values: tf.Tensor, key_start, key_end, width) -> tf.Tensor:
    """A piece's [B, H, keys, D] placed at its keys' rows of [B, H, T, D] (zeros elsewhere)."""
    return tf.pad(values, [[0, 0], [0, 0], [key_start, width - key_end], [0, 0]])


def chunked_attention(
    query: tf.Tensor,
    key: tf.Tensor,
    value: tf.Tensor,
    bias: tf.Tensor,
    half_window: int | None = None,
    seed: tf.Tensor | None = None,
    rate: float = 0.0,
    chunk: int | None = None,
) -> tf.Tensor:
    """softmax(q k^T / sqrt(d) + bias [+ band]) v over [B, H, T, D] with a static T, in pieces of `chunk` queries
    unrolled into static slices (what XLA compiles: a TPU); `bias` is [B|1, H|1, T|1, T] float32; `rate` > 0 drops
    weights with a stateless mask from `seed`."""
    width = query.shape[2]
    pieces = chunks(width, chunk or QUERY_CHUNK, half_window)
    scale = 1.0 / math.sqrt(query.shape[-1])

    def forward(q, k, v, b, index):
        return _piece_weights(q, k, v, b, pieces[index], index, half_window, scale, seed, rate)

    @tf.custom_gradient
    def attend(q, k, v, b):
        # The forward pass from stopped inputs: an enclosing GradientTape records every op of a custom gradient's
        # function (and holds its tensors for the backward pass it will not run) unless its inputs are stopped. The
        # backward pass reads them too: the arguments may belong to an enclosing graph (a branch of a tf.cond within
        # a tf.function), whose tensors a cond's gradient cannot capture (an assertion in cond_v2).
        q_, k_, v_, b_ = (tf.stop_gradient(t) for t in (q, k, v, b))
        outputs = []
        for index, (_, _, key_start, key_end) in enumerate(pieces):
            # One piece after the other: independent ops, TensorFlow's executor would run them side by side and hold
            # every piece's weights at once, the [T, T] this avoids.
            with tf.control_dependencies(outputs[-1:]):
                outputs.append(tf.matmul(forward(q_, k_, v_, b_, index)[2], v_[:, :, key_start:key_end]))

        def backward(upstream):
            return _backward(q_, k_, v_, b_, upstream, pieces, forward, scale, rate)

        return tf.concat(outputs, axis=2), backward

    return attend(query, key, value, bias)


_ROWS_FIRST, _ROWS_BACK = [2, 0, 1, 3], [1, 2, 0, 3]  # [B, H, T, X] <-> [T, B, H, X]: a TensorArray concatenates rows


def looped_attention(
    query: tf.Tensor,
    key: tf.Tensor,
    value: tf.Tensor,
    bias: tf.Tensor,
    half_window: int | None = None,
    seed: tf.Tensor | None = None,
    rate: float = 0.0,
    chunk: int | None = None,
) -> tf.Tensor:
    """chunked_attention's pieces, dropout and backward pass, each in a tf.while_loop that runs one piece at a time:
    a piece's [B, H, QUERY_CHUNK, T] weights alive, never [B, H, T, T]. Any width, also one known only at run time
    (the Trainer cuts each batch to its bucket's width, serving and evaluation to its longest text:
    models/serving/signatures.py); outside XLA it is the way pieces run (attention.scaled_dot_attention)."""
    chunk = chunk or QUERY_CHUNK
    scale = 1.0 / math.sqrt(query.shape[-1])

    def weights_of(q, k, v, b, index, width):
        piece = piece_at(index, width, chunk, half_window)
        return piece, *_piece_weights(q, k, v, b, piece, index, half_window, scale, seed, rate)

    @tf.custom_gradient
    def attend(q, k, v, b):
        q_, k_, v_, b_ = (tf.stop_gradient(t) for t in (q, k, v, b))  # as in chunked_attention
        width = tf.shape(q_)[2]

        def step(index, outputs):
            (_, _, key_start, key_end), _, _, weights = weights_of(q_, k_, v_, b_, index, width)
            attended = tf.matmul(weights, v_[:, :, key_start:key_end])
            return index + 1, outputs.write(index, tf.transpose(attended, _ROWS_FIRST))

        outputs = _over_pieces(
            width, chunk, step, tf.TensorArray(q.dtype, size=0, dynamic_size=True, infer_shape=False)
        )
        attended = tf.transpose(outputs.concat(), _ROWS_BACK)
        attended.set_shape([*q.shape[:3], v.shape[3]])  # what the TensorArray forgot: heads and their size

        def backward(upstream):
            return _looped_backward(q_, k_, v_, b_, upstream, width, chunk, weights_of, scale, rate)

        return attended, backward

    return attend(query, key, value, bias)


def _over_pieces(width, chunk: int, step, *state):
    """`step(index, *state)` for each piece of `width` in turn (parallel_iterations=1: never two pieces' weights)."""
    count = (width + chunk - 1) // chunk
    _, *state = tf.while_loop(lambda index, *_: index < count, step, (0, *state), parallel_iterations=1)
    return state[0] if len(state) == 1 else state


def _looped_backward(q, k, v, b, upstream, width, chunk, weights_of, scale, rate):
    """_backward in a tf.while_loop: each piece's weights recomputed, d_q by piece, d_k, d_v (and a broadcast bias'
    gradient) summed over pieces."""
    rows_broadcast = b.shape[2] == 1

    def step(index, d_q, d_k, d_v, d_b):
        piece, probabilities, keep, weights = weights_of(q, k, v, b, index, width)
        start, end, key_start, key_end = piece
        up = upstream[:, :, start:end]
        d_weights = tf.cast(tf.matmul(up, v[:, :, key_start:key_end], transpose_b=True), tf.float32)
        d_q_piece, d_k_piece, d_b_piece = _piece_gradients(
            q, k, b, piece, width, probabilities, keep, d_weights, rate, scale
        )
        d_v += _at_keys(tf.matmul(weights, up, transpose_a=True), key_start, key_end, width)
        d_b = d_b + d_b_piece if rows_broadcast else d_b.write(index, tf.transpose(d_b_piece, _ROWS_FIRST))
        return index + 1, d_q.write(index, tf.transpose(d_q_piece, _ROWS_FIRST)), d_k + d_k_piece, d_v, d_b

    def rows(dtype) -> tf.TensorArray:
        return tf.TensorArray(dtype, size=0, dynamic_size=True, infer_shape=False)

    d_b = tf.zeros_like(b) if rows_broadcast else rows(b.dtype)
    d_q, d_k, d_v, d_b = _over_pieces(width, chunk, step, rows(q.dtype), tf.zeros_like(k), tf.zeros_like(v), d_b)
    d_q = tf.transpose(d_q.concat(), _ROWS_BACK)
    d_bias = d_b if rows_broadcast else tf.transpose(d_b.concat(), _ROWS_BACK)
    return tf.cast(d_q, q.dtype), d_k, d_v, tf.reshape(d_bias, tf.shape(b))


def _backward(q, k, v, b, upstream, pieces, forward, scale, rate):
    """Each piece's weights recomputed once the gradient arrives; d_q by piece, d_k and d_v summed over pieces."""
    width = q.shape[2]
    d_q, d_k, d_v, d_b = [], tf.zeros_like(k), tf.zeros_like(v), []
    for index, piece in enumerate(pieces):
        start, end, key_start, key_end = piece
        up = upstream[:, :, start:end]
        # Not before this layer's gradient exists (see attention.py), and only once every use of the piece before is
        # done (its d_q, and its parts of d_k, d_v and the bias' gradient): the executor would otherwise run ahead
        # along d_q and hold every piece's weights and score gradients for the later uses.
        # The weights' gradient too: built outside, it depends only on the upstream gradient and v, and the executor
        # computes every piece's at once ([B, H, T, T] in all) as soon as the backward pass starts.
        done_before = [d_q[-1], d_k, d_v, d_b[-1]] if d_q else []
        with tf.control_dependencies([up, *done_before]):
            probabilities, keep, weights = forward(tf.identity(q), tf.identity(k), tf.identity(v), b, index)
            d_weights = tf.cast(tf.matmul(up, v[:, :, key_start:key_end], transpose_b=True), tf.float32)
        d_q_piece, d_k_piece, d_b_piece = _piece_gradients(
            q, k, b, piece, width, probabilities, keep, d_weights, rate, scale
        )
        d_q.append(d_q_piece)
        d_k += d_k_piece
        d_v += _at_keys(tf.matmul(weights, up, transpose_a=True), key_start, key_end, width)
        d_b.append(d_b_piece)
    rows_broadcast = b.shape[2] == 1
    d_bias = tf.add_n(d_b) if rows_broadcast else tf.concat(d_b, axis=2)
    return tf.concat(d_q, axis=2), d_k, d_v, tf.reshape(d_bias, tf.shape(b))


def _bias_gradient_of_piece(d_scores: tf.Tensor, bias: tf.Tensor, before: int, after: int) -> tf.Tensor:
    """A piece's part of the bias' gradient: its scores' gradient summed where the bias broadcasts (batch, heads,
    query rows), placed at its key columns. Summed first, so a [B, 1, 1, T] padding bias never costs [B, H, T, T]."""
    axes = [i for i in range(3) if bias.shape[i] == 1]
    summed = tf.reduce_sum(d_scores, axis=axes, keepdims=True) if axes else d_scores
    return tf.pad(summed, [[0, 0], [0, 0], [0, 0], [before, after]])
