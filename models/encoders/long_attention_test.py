"""Attention in pieces of queries against the full [T, T] computation: the same outputs and the same gradients
(q, k, v and a trainable bias), global and local (banded), with padding; the local pieces read only their band."""

import numpy as np
import pytest
import tensorflow as tf

from models.encoders import long_attention
from models.encoders.layers import attention_bias, padding_mask, window_mask

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
        bias = bias + attention_bias(window_mask(T, half_window))
    weights = tf.nn.softmax(tf.matmul(q, k, transpose_b=True) / np.sqrt(D) + bias, axis=-1)
    return tf.matmul(weights, v)


def _with_gradients(function, q, k, v, bias):
    with tf.GradientTape() as tape:
        tape.watch([q, k, v, bias])
        out = function(q, k, v, bias) * REAL
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


@pytest.mark.parametrize("half_window", [None, 4])
@pytest.mark.parametrize("chunk", [7, 16, 40])
def test_at_a_width_known_only_at_run_time_the_looped_pieces_give_full_attentions_numbers(half_window, chunk):
    """Serving and evaluation cut each batch to its longest text, so the traced width is unknown."""
    q, k, v, bias = _inputs()
    relative = tf.constant(np.random.default_rng(1).normal(size=(1, H, T, T)), tf.float32)
    any_width = tf.TensorSpec([B, H, None, D], tf.float32)
    for b, bias_spec in ((bias, [B, 1, 1, None]), (bias + relative, [B, H, None, None])):
        looped = tf.function(
            lambda q, k, v, b: long_attention.looped_attention(q, k, v, b, half_window, chunk=chunk),
            input_signature=[any_width, any_width, any_width, tf.TensorSpec(bias_spec)],
        )
        traced = looped.get_concrete_function()
        assert any(op.type.endswith("While") for op in traced.graph.get_operations())
        assert traced.output_shapes.as_list() == [B, H, None, D]  # merge_heads reads H and D statically
        want = _full(q, k, v, b, half_window) * REAL
        np.testing.assert_allclose((looped(q, k, v, b) * REAL).numpy(), want.numpy(), rtol=0, atol=2e-6)


def test_inference_at_a_run_time_width_past_query_chunk_takes_the_pieces(monkeypatch):
    """scaled_dot_attention outside training: the looped pieces past QUERY_CHUNK, [T, T] at once within it."""
    from models.encoders.layers import scaled_dot_attention

    monkeypatch.setattr(long_attention, "QUERY_CHUNK", 16)
    q, k, v, bias = _inputs()
    taken = []
    looped = long_attention.looped_attention
    monkeypatch.setattr(long_attention, "looped_attention", lambda *a, **kw: taken.append(1) or looped(*a, **kw))
    any_width = tf.TensorSpec([B, H, None, D], tf.float32)

    @tf.function(input_signature=[any_width, any_width, any_width, tf.TensorSpec([B, 1, 1, None])])
    def attend(q, k, v, b):
        return scaled_dot_attention(q, k, v, b, tf.keras.layers.Dropout(0.1), False, 4)

    for width in (T, 12):  # past QUERY_CHUNK, within it
        cut = [t[:, :, :width] for t in (q, k, v)]
        want = _full(*cut, bias[..., :width], 4)[:, :, :width] if width == T else None
        got = attend(*cut, bias[..., :width])
        if want is not None:
            np.testing.assert_allclose((got * REAL).numpy(), (want * REAL).numpy(), rtol=0, atol=2e-6)
    assert taken  # traced once, its cond holding both ways


def test_local_pieces_read_only_their_band_of_keys():
    assert long_attention.chunks(40, 16, None) == [(0, 16, 0, 40), (16, 32, 0, 40), (32, 40, 0, 40)]
    assert long_attention.chunks(40, 16, 4) == [(0, 16, 0, 20), (16, 32, 12, 36), (32, 40, 28, 40)]


def test_dropout_masks_are_the_same_forward_and_backward():
    """With dropout, the gradient is the one of the function the forward pass computed: checked against a
    finite difference along a random direction."""
    q, k, v, bias = _inputs(2)
    seed = tf.constant([3, 5])

    def attend(q):
        return long_attention.chunked_attention(q, k, v, bias, None, seed, rate=0.3, chunk=16)

    with tf.GradientTape() as tape:
        tape.watch(q)
        loss = tf.reduce_sum(attend(q) ** 2)
    gradient = tape.gradient(loss, q)
    direction = tf.constant(np.random.default_rng(4).normal(size=q.shape), tf.float32)
    step = 1e-2
    numeric = (tf.reduce_sum(attend(q + step * direction) ** 2) - tf.reduce_sum(attend(q - step * direction) ** 2)) / (
        2 * step
    )
    assert float(tf.reduce_sum(gradient * direction)) == pytest.approx(float(numeric), rel=2e-2)


_PEAK_OF_GRADIENTS = """
import json, resource, sys
import tensorflow as tf
from models.encoders import long_attention
width = int(sys.argv[1])
q, k, v = (tf.Variable(tf.random.normal([1, 12, width, 64])) for _ in range(3))
bias = tf.zeros([1, 1, 1, width])

@tf.function
def gradients():
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(long_attention.chunked_attention(q, k, v, bias, chunk=128) ** 2)
    return tape.gradient(loss, [q, k, v])

before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
gradients()
print(json.dumps((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024))
"""


def test_the_backward_pass_never_holds_every_pieces_weights_at_once():
    """The promise of the pieces: no [B, H, T, T] worth of float32 alive, backward included. At 4,096 tokens and 12
    heads that is 805 MB; the pieces' backward grew the process by about that (every piece's gradient of its weights
    computed as soon as the backward pass began) until each waited for the piece before."""
    import json
    import subprocess
    import sys

    width = 4096
    done = subprocess.run([sys.executable, "-c", _PEAK_OF_GRADIENTS, str(width)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    grown = json.loads(done.stdout.strip().splitlines()[-1])
    whole = 12 * width * width * 4
    assert grown < whole / 3, f"the backward pass grew the process by {grown / 2**20:.0f} MiB, [T, T] is {whole >> 20}"
