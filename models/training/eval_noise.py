"""How much of an epoch's eval loss is the eval split's noise: the standard error of its mean.

val_loss is a mean over the eval examples, so it moves by about std(per-example loss) / sqrt(examples) between
epochs that predict equally well: 0.005 on 300 pages near chance. Early stopping that counts such a rise as a
regression stops on noise (components/trainer/best_epoch.py). Keras reports only the mean, so the per-example
loss squared is averaged beside it (`squared_loss_metric`), on the same forward pass.
"""

from __future__ import annotations

import math

LOSS_SQUARED = "loss_squared"  # the metric's name; Keras reports the eval split's as val_loss_squared


def measures_noise(metric: str) -> bool:
    """Whether a Keras log key is the loss squared (train or eval): averaged for the noise, not a result to show."""
    return metric.endswith(LOSS_SQUARED)


def eval_result(metric: str) -> bool:
    """Whether a Keras log key is an eval-split result to report (the summary's exported epoch, a Tuner trial)."""
    return metric.startswith("val_") and not measures_noise(metric)


def squared_loss_metric(per_example_loss):
    """A Keras metric: the mean of `per_example_loss(labels, logits)` squared (the training loss, unreduced)."""
    import tensorflow as tf
    import tf_keras

    def squared(labels, logits):
        return tf.square(tf.cast(per_example_loss(labels, logits), tf.float32))

    return tf_keras.metrics.MeanMetricWrapper(squared, name=LOSS_SQUARED)


def loss_noise(mean: float, mean_of_squares: float, examples: int) -> float:
    """The standard error of a mean loss over `examples`, from the mean and the mean of the squares."""
    if examples <= 1:
        return math.inf
    return math.sqrt(max(mean_of_squares - mean * mean, 0.0) / examples)
