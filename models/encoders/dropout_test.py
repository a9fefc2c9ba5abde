"""Dropout's masks from 16 random bits an element: the rate they drop, the same mask from the same seed, and the
Keras layer built on them."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from models.encoders.dropout import Dropout, apply_mask, drawn_rate, keep_mask


@pytest.mark.parametrize("rate", [0.1, 0.3, 0.5])
def test_a_mask_drops_the_rate_and_the_same_seed_draws_it_again(rate):
    shape = tf.constant([7, 13, 1001])  # an odd count of elements: the last word's second half is left out
    mask = keep_mask(shape, tf.constant([3, 9]), rate)
    assert mask.shape == (7, 13, 1001) and mask.dtype == tf.bool
    dropped, count = float(tf.reduce_sum(tf.cast(~mask, tf.float64))), 7 * 13 * 1001
    assert abs(dropped / count - rate) < 5 * np.sqrt(rate * (1 - rate) / count)  # within five standard errors
    np.testing.assert_array_equal(mask, keep_mask(shape, tf.constant([3, 9]), rate))
    assert not np.array_equal(mask, keep_mask(shape, tf.constant([3, 10]), rate))
    assert abs(drawn_rate(rate) - rate) <= 2**-17


def test_neighbouring_elements_are_independent():
    """Each 32-bit word decides two neighbours (its halves): they must not be kept or dropped together."""
    keep = keep_mask(tf.constant([200_000]), tf.constant([1, 2]), 0.5).numpy()
    both_dropped = np.mean(~keep[0::2] & ~keep[1::2])
    assert abs(both_dropped - 0.25) < 0.01


def test_the_layer_drops_while_training_scales_what_it_keeps_and_masks_the_gradient_the_same_way():
    layer = Dropout(0.25)
    x = tf.random.stateless_normal([64, 128], seed=[1, 2]) + 3.0  # no element is 0 by chance
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, training=True)
    gradient = tape.gradient(y, x)
    kept = (y != 0).numpy()
    assert 0.70 < kept.mean() < 0.80
    np.testing.assert_allclose(y.numpy()[kept], x.numpy()[kept] / (1 - drawn_rate(0.25)), rtol=1e-6)
    np.testing.assert_allclose(gradient.numpy(), np.where(kept, 1 / (1 - drawn_rate(0.25)), 0.0), rtol=1e-6)
    np.testing.assert_array_equal(layer(x, training=False), x)
    assert isinstance(layer, tf_keras.layers.Dropout) and layer.get_config()["rate"] == 0.25


def test_a_run_repeated_under_the_global_seed_draws_the_same_masks():
    masks = []
    for _ in range(2):
        tf_keras.utils.set_random_seed(5)
        layer = Dropout(0.1)
        step = tf.function(lambda x, layer=layer: layer(x, training=True))
        masks.append([step(tf.ones([4, 32])).numpy() for _ in range(3)])
    np.testing.assert_array_equal(masks[0], masks[1])
    assert not np.array_equal(masks[0][0], masks[0][1])  # a new mask each step


def test_apply_mask_keeps_the_inputs_dtype():
    x = tf.ones([8], tf.bfloat16)
    keep = tf.constant([True, False] * 4)
    out = apply_mask(x, keep, 0.5)
    assert out.dtype == tf.bfloat16
    np.testing.assert_array_equal(tf.cast(out, tf.float32), [2.0, 0.0] * 4)


def test_under_xla_the_same_seed_draws_the_same_mask_and_the_gradient_follows_it():
    """A TPU compiles the whole step with XLA: the mask must compile and be the graph's own for a seed."""
    shape, seed = tf.constant([9, 11]), tf.constant([1, 2])
    compiled = tf.function(lambda: keep_mask(shape, seed, 0.5), jit_compile=True)()
    np.testing.assert_array_equal(compiled, keep_mask(shape, seed, 0.5))
    layer = Dropout(0.1)

    @tf.function(jit_compile=True)
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, training=True)
        return y, tape.gradient(y, x)

    y, gradient = step(tf.ones([3, 7, 5]))
    np.testing.assert_array_equal(y.numpy() != 0, gradient.numpy() != 0)
    assert 0 < np.mean(y.numpy() == 0) < 0.5
