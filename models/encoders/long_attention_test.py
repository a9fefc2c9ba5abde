"""Attention in pieces of queries against the full [T, T] computation: the same outputs and the same gradients
(q, k, v and a trainable bias), global and local (banded), with padding; the local pieces read only their band."""

import functools

import numpy as np
import pytest
import tensorflow as tf

from models.encoders import long_attention
from models.encoders.attention import attention_bias, padding_mask, window_mask

B, H, T, D = 2, 3, 40, 8
LENGTHS = [T, 27]
# The real tokens' rows: a padding query's row is all masked (near its band's end, every key it may see is padding),
# and what it attends to there reaches no real token's output, as in transformers.
REAL = tf.sequence_mask(LENGTHS, T, dtype=tf.float32)[:, tf.newaxis, :, tf.newaxis]


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    q, k, v = (tf.constant(rng.normal(size=(B, H, T, D)), tf.float32) for _ in range(3))
    mask = tf.sequence_mask(LENGTHS, T, dtype=tf.int32)
    return q, k, v, attention_bias(padding_mask(mask))


def _full(q, k, v, bias, half_window):
    if half_window is not None:
        bias = bias + attention_bias(window_mask(tf.shape(q)[2], half_window))
    weights = tf.nn.softmax(tf.matmul(q, k, transpose_b=True) / np.sqrt(D) + bias, axis=-1)
    return tf.matmul(weights, v)


def _with_gradients(function, q, k, v, bias):
    with tf.GradientTape() as tape:
        tape.watch([q, k, v, bias])
        out = function(q, k, v, bias) * REAL[:, :, : tf.shape(q)[2]]
        loss = tf.reduce_sum(out * out)
    return out, tape.gradient(loss, [q, k, v, bias])


@pytest.mark.parametrize("half_window", [None, 4])
@pytest.mark.parametrize("chunk", [7, 16, 40])
def test_pieces_of_queries_give_full_attentions_numbers_and_gradients(half_window, chunk):
    q, k, v, bias = _inputs()
    relative = tf.constant(np.random.default_rng(1).normal(size=(1, H, T, T)), tf.float32)  # MPNet's kind of bias

    def chunked(q, k, v, b):
        return long_attention.chunked_attention(q, k, v, b, half_window, chunk=chunk)

    def full(q, k, v, b):
        return _full(q, k, v, b, half_window)

    for b in (bias, bias + relative):
        ours, our_grads = _with_gradients(chunked, q, k, v, b)
        theirs, their_grads = _with_gradients(full, q, k, v, b)
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=0, atol=2e-6)
        for mine, want in zip(our_grads, their_grads, strict=True):
            np.testing.assert_allclose(tf.reshape(mine, want.shape).numpy(), want.numpy(), rtol=0, atol=5e-5)


def _at_run_time_width(function, bias_spec):
    """`function` traced with the width unknown: how the Trainer's bucketed batches and served batches reach it."""
    any_width = tf.TensorSpec([B, H, None, D], tf.float32)
    traced = tf.function(function, input_signature=[any_width, any_width, any_width, tf.TensorSpec(bias_spec)])
    assert traced.get_concrete_function().output_shapes.as_list() == [B, H, None, D]  # merge_heads reads H and D
    return traced


@pytest.mark.parametrize("half_window", [None, 4])
@pytest.mark.parametrize("chunk", [7, 16, 40])
def test_at_a_width_known_only_at_run_time_the_looped_pieces_give_full_attentions_numbers_and_gradients(
    half_window, chunk
):
    """The Trainer cuts each batch to its bucket's width, serving and evaluation to its longest text: the traced
    width is unknown, and the pieces run in a loop, forward and backward."""
    q, k, v, bias = _inputs()
    relative = tf.constant(np.random.default_rng(1).normal(size=(1, H, T, T)), tf.float32)
    for b, bias_spec in ((bias, [B, 1, 1, None]), (bias + relative, [B, H, None, None])):
        looped = _at_run_time_width(
            lambda q, k, v, b: long_attention.looped_attention(q, k, v, b, half_window, chunk=chunk), bias_spec
        )
        assert any(op.type.endswith("While") for op in looped.get_concrete_function().graph.get_operations())
        gradients = tf.function(lambda q, k, v, b, looped=looped: _with_gradients(looped, q, k, v, b))
        ours, our_grads = gradients(q, k, v, b)
        theirs, their_grads = _with_gradients(lambda q, k, v, b: _full(q, k, v, b, half_window), q, k, v, b)
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=0, atol=2e-6)
        for mine, want in zip(our_grads, their_grads, strict=True):
            np.testing.assert_allclose(tf.reshape(mine, want.shape).numpy(), want.numpy(), rtol=0, atol=5e-5)


@pytest.mark.parametrize("training", [False, True])
def test_at_a_run_time_width_past_query_chunk_attention_takes_the_pieces(training, monkeypatch):
    """scaled_dot_attention at a run-time width: the looped pieces past QUERY_CHUNK, [T, T] at once within it (in
    training recomputed where it would keep too much), one traced function holding both, gradients included."""
    from models.encoders import attention

    monkeypatch.setattr(long_attention, "QUERY_CHUNK", 16)
    monkeypatch.setattr(attention, "RECOMPUTE_ABOVE_BYTES", 16 * B * H * 13 * 13)  # recomputed from 13 tokens
    q, k, v, bias = _inputs()
    taken = []
    looped = long_attention.looped_attention
    monkeypatch.setattr(long_attention, "looped_attention", lambda *a, **kw: taken.append(1) or looped(*a, **kw))

    def attend(q, k, v, b):
        return attention.scaled_dot_attention(q, k, v, b, tf.keras.layers.Dropout(0.0), training, 4)

    traced = _at_run_time_width(attend, [B, 1, 1, None])
    ours = tf.function(lambda q, k, v, b: _with_gradients(traced, q, k, v, b)) if training else traced
    full = functools.partial(_full, half_window=4)
    for width in (T, 14, 12):  # past QUERY_CHUNK; within it, recomputed (in training) and kept
        cut = [t[..., :width, :] for t in (q, k, v)] + [bias[..., :width]]
        if training:
            (got, got_grads), (want, want_grads) = ours(*cut), _with_gradients(full, *cut)
            for mine, theirs in zip(got_grads, want_grads, strict=True):
                np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=0, atol=5e-5)
        else:
            real = REAL[:, :, :width]
            got, want = ours(*cut) * real, full(*cut) * real
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=2e-6)
    assert taken  # traced once, its cond holding both ways


def test_local_pieces_read_only_their_band_of_keys():
    assert long_attention.chunks(40, 16, None) == [(0, 16, 0, 40), (16, 32, 0, 40), (32, 40, 0, 40)]
    assert long_attention.chunks(40, 16, 4) == [(0, 16, 0, 20), (16, 32, 12, 36), (32, 40, 28, 40)]


@pytest.mark.parametrize("pieces", ["chunked", "looped"])
def test_dropout_masks_are_the_same_forward_and_backward(pieces):
    """With dropout, the gradient is the one of the function the forward pass computed: checked against a
    finite difference along a random direction."""
    q, k, v, bias = _inputs(2)
    seed = tf.constant([3, 5])
    function = getattr(long_attention, f"{pieces}_attention")

    @tf.function
    def attend(q):
        return function(q, k, v, bias, None, seed, rate=0.3, chunk=16)

    @tf.function
    def gradient_of(q):
        with tf.GradientTape() as tape:
            tape.watch(q)
            loss = tf.reduce_sum(attend(q) ** 2)
        return tape.gradient(loss, q)

    gradient = gradient_of(q)
    direction = tf.constant(np.random.default_rng(4).normal(size=q.shape), tf.float32)
    step = 1e-2
    numeric = (tf.reduce_sum(attend(q + step * direction) ** 2) - tf.reduce_sum(attend(q - step * direction) ** 2)) / (
        2 * step
    )
    assert float(tf.reduce_sum(gradient * direction)) == pytest.approx(float(numeric), rel=2e-2)
    dropped = float(tf.reduce_mean(tf.cast(attend(q) == function(q, k, v, bias, None, seed, chunk=16), tf.float32)))
    assert dropped < 0.5  # the mask drops: outputs differ from the undropped ones


_PEAK_OF_GRADIENTS = """
import json, resource, sys
import tensorflow as tf
from models.encoders import long_attention
width, pieces = int(sys.argv[1]), getattr(long_attention, sys.argv[2] + "_attention")
q, k, v = (tf.Variable(tf.random.normal([1, 12, width, 64])) for _ in range(3))
bias = tf.zeros([1, 1, 1, width])
any_width = [tf.TensorSpec([1, 12, None, 64]), tf.TensorSpec([1, 1, 1, None])]

@tf.function(input_signature=None if sys.argv[2] == "chunked" else any_width)
def gradients(key, bias):
    with tf.GradientTape() as tape:
        seed = tf.random.uniform([2], maxval=2**31 - 1, dtype=tf.int32)  # a constant one: masks folded to constants
        loss = tf.reduce_sum(pieces(q, key, v, bias, seed=seed, rate=0.1, chunk=128) ** 2)
    return tape.gradient(loss, [q, k, v])

before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
gradients(k, bias)
print(json.dumps((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024))
"""


@pytest.mark.parametrize("pieces", ["chunked", "looped"])
def test_the_backward_pass_never_holds_every_pieces_weights_at_once(pieces):
    """The promise of the pieces: no [B, H, T, T] worth of float32 alive, backward included. At 4,096 tokens and 12
    heads that is 805 MB; the pieces' backward grew the process by about that (every piece's gradient of its weights
    computed as soon as the backward pass began) until each waited for the piece before. The loop (a run-time
    width) runs one piece at a time. With dropout, 200-310 MiB: q, k, v, their gradients and a piece's weights,
    mask and the gradients of its scores."""
    import json
    import subprocess
    import sys

    width = 4096
    args = [sys.executable, "-c", _PEAK_OF_GRADIENTS, str(width), pieces]
    done = subprocess.run(args, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    grown = json.loads(done.stdout.strip().splitlines()[-1])
    whole = 12 * width * width * 4
    assert grown < whole / 2, f"the backward pass grew the process by {grown / 2**20:.0f} MiB, [T, T] is {whole >> 20}"


@pytest.mark.parametrize(
    ("widest", "training", "branches"),
    [
        (None, True, 3),  # unbounded: kept, recomputed, pieces
        (None, False, 2),  # serving: kept, pieces
        (24, True, 3),  # past QUERY_CHUNK (16 here), recomputed from 13 tokens
        (12, True, 1),  # never recomputed, never in pieces: no switch at all (a cond costs 4-5% of a MiniLM step)
        (16, True, 2),  # kept or recomputed
        (16, False, 1),
    ],
)
def test_the_widest_batch_leaves_out_the_branches_that_cannot_happen(widest, training, branches, monkeypatch):
    """bound_width: with the widest batch known (the Trainer's max_seq_length), a run-time width switches only among
    the ways of attending that it can take."""
    from models.encoders import attention

    monkeypatch.setattr(long_attention, "QUERY_CHUNK", 16)
    monkeypatch.setattr(attention, "RECOMPUTE_ABOVE_BYTES", 16 * B * H * 13 * 13)

    def attend(q, k, v, b):
        return attention.scaled_dot_attention(q, k, v, b, tf.keras.layers.Dropout(0.0), training, 4, _bounds(widest))

    _assert_branches(_at_run_time_width(attend, [B, 1, 1, None]), branches)


@pytest.mark.parametrize(
    ("most_rows", "training", "branches"),
    [
        (None, True, 2),  # unbounded: kept or recomputed (kept alone, packed rows trained MiniLM at 512 in 10 GiB)
        (2 * B, True, 2),  # 12 tokens in 2B rows would keep more than 13 tokens in B: kept or recomputed
        (B, True, 1),  # never recomputed: no switch
        (None, False, 1),  # serving keeps
    ],
)
def test_rows_counted_at_run_time_switch_only_where_the_most_rows_may_keep_too_much(
    most_rows, training, branches, monkeypatch
):
    """Packed batches: their width is the run's, their rows known only at run time (as many as the texts need).
    bound_width's most_rows (a replica's batch) leaves out recomputation where even that many rows keep little."""
    from models.encoders import attention

    monkeypatch.setattr(attention, "RECOMPUTE_ABOVE_BYTES", 16 * B * H * 13 * 13)
    rows = tf.TensorSpec([None, H, 12, D], tf.float32)

    def attend(q, k, v, b):
        dropout = tf.keras.layers.Dropout(0.0)
        return attention.scaled_dot_attention(q, k, v, b, dropout, training, None, _bounds(12, most_rows))

    traced = tf.function(attend, input_signature=[rows, rows, rows, tf.TensorSpec([None, 1, 12, 12])])
    _assert_branches(traced, branches)
    if branches > 1:  # each batch takes its way (few rows kept, many recomputed), both exact
        for count in (B, 3 * B):
            rng = np.random.default_rng(count)
            q, k, v = (tf.constant(rng.normal(size=(count, H, 12, D)), tf.float32) for _ in "qkv")
            no_bias = tf.zeros([count, 1, 12, 12])
            got, want = (_sum_of_squares_and_gradients(f, q, k, v, no_bias) for f in (traced, _full_attention))
            for mine, theirs in zip(got, want, strict=True):
                np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-5, atol=5e-5)


def _full_attention(q, k, v, bias):
    return _full(q, k, v, bias, None)


def _sum_of_squares_and_gradients(function, q, k, v, bias):
    with tf.GradientTape() as tape:
        tape.watch([q, k, v])
        loss = tf.reduce_sum(tf.square(function(q, k, v, bias)))
    return [loss, *tape.gradient(loss, [q, k, v])]


def _bounds(widest=None, most_rows=None):
    """What a layer calling scaled_dot_attention passes as its bounds (bound_width sets them on the model's layers)."""
    from models.encoders.layers import BoundedWidth

    bounds = BoundedWidth()
    bounds.widest, bounds.most_rows = widest, most_rows
    return bounds


def _assert_branches(traced, branches: int) -> None:
    """The traced attention has one switch of `branches` ways, or none where only one way can happen."""
    graph = traced.get_concrete_function().graph
    cases = [op for op in graph.get_operations() if op.type in ("Case", "StatelessCase")]
    assert len(cases) == (branches > 1)
    if cases:
        assert len(cases[0].get_attr("branches")) == branches


@pytest.mark.parametrize("pieces", ["chunked", "looped"])
def test_under_bfloat16_the_pieces_train_as_in_float32(pieces):
    """Mixed precision: q, k, v in bfloat16, scores, softmax and the bias in float32 (as transformers computes them)."""
    q, k, v, bias = _inputs()
    function = getattr(long_attention, f"{pieces}_attention")

    def attend(q, k, v, b):
        return tf.cast(function(q, k, v, b, 4, chunk=16), tf.float32)

    half = [tf.cast(t, tf.bfloat16) for t in (q, k, v)]
    (ours, our_grads), (theirs, their_grads) = (
        tf.function(lambda *t: _with_gradients(attend, *t))(*args, bias) for args in (half, (q, k, v))
    )
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=0, atol=0.05)
    for mine, want in zip(our_grads, their_grads, strict=True):
        np.testing.assert_allclose(tf.cast(mine, tf.float32).numpy(), want.numpy(), rtol=0.1, atol=0.1)
