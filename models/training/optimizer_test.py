import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from models.training.optimizer import AdamW, WarmupLinearDecay, adamw_with_warmup


def test_the_rate_rises_linearly_over_the_warmup_then_falls_linearly_to_zero_at_the_last_step():
    schedule = WarmupLinearDecay(1e-3, warmup_steps=10, total_steps=110)
    rates = [float(schedule(step)) for step in (0, 5, 10, 60, 110, 200)]
    np.testing.assert_allclose(rates, [0.0, 5e-4, 1e-3, 5e-4, 0.0, 0.0], atol=1e-9)
    no_warmup = WarmupLinearDecay(1e-3, warmup_steps=0, total_steps=100)
    np.testing.assert_allclose([float(no_warmup(s)) for s in (0, 50)], [1e-3, 5e-4], atol=1e-9)


def _one_step(optimizer, matrix, bias, gradient):
    optimizer.apply_gradients([(tf.constant(gradient), matrix), (tf.constant(gradient[0]), bias)])
    return matrix.numpy(), bias.numpy()


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_decay_shrinks_matrices_by_rate_times_decay_and_leaves_biases_and_norms_to_adam(weight_decay):
    """Decoupled decay: a matrix first loses lr x decay of itself, then takes Adam's step; a 1-D weight (a bias,
    a norm's scale) takes Adam's step alone, as with no decay at all."""
    start = np.array([[1.0, -2.0], [3.0, 0.5]], np.float32)
    gradient = np.array([[0.1, -0.3], [0.2, 0.0]], np.float32)
    results = {}
    for name, optimizer in (("adamw", AdamW(0.01, weight_decay)), ("adam", tf_keras.optimizers.legacy.Adam(0.01))):
        matrix, bias = tf.Variable(start), tf.Variable(start[0])
        if name == "adam":
            matrix.assign(start * (1 - 0.01 * weight_decay))  # the decay, applied by hand before Adam's step
            optimizer.epsilon = 1e-8
        results[name] = _one_step(optimizer, matrix, bias, gradient)
    np.testing.assert_allclose(results["adamw"][0], results["adam"][0], rtol=1e-6)
    np.testing.assert_allclose(results["adamw"][1], results["adam"][1], rtol=1e-6)


def test_the_fine_tuning_optimizer_clips_at_the_global_norm_it_is_given():
    optimizer = adamw_with_warmup(1e-3, total_steps=100, warmup_steps=10, weight_decay=0.01, global_clipnorm=1.0)
    config = optimizer.get_config()
    assert config["global_clipnorm"] == 1.0 and config["weight_decay"] == 0.01 and config["epsilon"] == 1e-8
    assert isinstance(optimizer.learning_rate, WarmupLinearDecay)
