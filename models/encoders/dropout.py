"""Dropout's keep masks, drawn 16 random bits an element: one stateless 32-bit word decides two elements.

Drawing the random numbers was most of dropout's time in a training step: TensorFlow's RandomUniform makes one
32-bit word an element, then a float of it (14 ms of a 277 ms MiniLM step on 2 cores, against 7 for the words this
draws). 16 bits set the rate to within 1/65,536 (0.1 drops 6,554 in 65,536 elements: 0.10001); kept elements are
scaled by the rate drawn, so the expected output is the input's, as Keras' dropout keeps it.

Every dropout of the encoders draws here: Keras' Dropout layers (the Dropout below), and the attention weights that
are recomputed in the backward pass (attention.recomputed_attention, long_attention), whose backward pass draws the same
mask again from the same seed.
"""

from __future__ import annotations

import tensorflow as tf
import tf_keras

_LEVELS = 2**16


def drawn_rate(rate: float) -> float:
    """The share of elements a mask drops: `rate` rounded to 16 bits."""
    return round(float(rate) * _LEVELS) / _LEVELS


def keep_mask(shape: tf.Tensor, seed: tf.Tensor, rate: float) -> tf.Tensor:
    """A bool tensor of `shape`, True where an element is kept: each False with probability drawn_rate(rate), from
    the stateless `seed` ([2] int32), so the same seed gives the same mask."""
    shape = tf.cast(shape, tf.int32)
    count = tf.reduce_prod(shape)
    words = tf.random.stateless_uniform([(count + 1) // 2], seed, minval=None, maxval=None, dtype=tf.int32)
    halves = tf.reshape(tf.bitcast(words, tf.int16), [-1])[:count]  # bitcast: [n, 2] int16, no copy
    return tf.reshape(halves >= round(drawn_rate(rate) * _LEVELS) - _LEVELS // 2, shape)


def apply_mask(x: tf.Tensor, keep: tf.Tensor, rate: float) -> tf.Tensor:
    """x's kept elements scaled by 1 / (1 - drawn_rate(rate)), the others 0 (a gradient is masked the same way)."""
    return tf.where(keep, x * tf.cast(1.0 / (1.0 - drawn_rate(rate)), x.dtype), tf.zeros([], x.dtype))


def fresh_seed() -> tf.Tensor:
    """A stateless seed from TensorFlow's stateful generator: a new mask each step, the same ones in a run repeated
    under the same global seed (tf_keras.utils.set_random_seed)."""
    return tf.random.uniform([2], maxval=2**31 - 1, dtype=tf.int32)


class Dropout(tf_keras.layers.Dropout):
    """tf_keras' Dropout (its rate, its config, set_dropout finds it), drawing its masks with keep_mask."""

    def call(self, inputs, training=None):
        if self.noise_shape is not None or not isinstance(self.rate, float | int) or drawn_rate(self.rate) == 0:
            return super().call(inputs, training=training)
        if training is None:
            training = tf_keras.backend.learning_phase()

        def dropped():
            return apply_mask(inputs, keep_mask(tf.shape(inputs), fresh_seed(), self.rate), self.rate)

        return tf.__internal__.smart_cond.smart_cond(training, dropped, lambda: tf.identity(inputs))
