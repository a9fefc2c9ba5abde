"""The activations config.json names (transformers' ACT2FN), the GELUs with backward passes that keep only their
input, and a feed-forward's second matrix that computes its activation again in the backward pass past a size."""

from __future__ import annotations

import math
from collections.abc import Callable

import tensorflow as tf
import tf_keras

from models.encoders.layers import BoundedWidth, UnsupportedConfigError, backward_scope


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
            gradient_scope = backward_scope(scope)

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
        gradient_scope = backward_scope()

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

def activation(name: str) -> Callable[[tf.Tensor], tf.Tensor]:
    if name not in ACTIVATIONS:
        raise UnsupportedConfigError(f"activation '{name}' is not one of {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]
