import math

import numpy as np
import tf_keras

from models.training.eval_noise import eval_result, loss_noise, measures_noise, squared_loss_metric


def test_the_noise_is_the_standard_error_of_the_mean_loss():
    losses = np.random.default_rng(0).gamma(2.0, 0.3, size=400)
    noise = loss_noise(losses.mean(), (losses**2).mean(), len(losses))
    assert math.isclose(noise, losses.std() / math.sqrt(len(losses)), rel_tol=1e-9)
    assert loss_noise(0.5, 0.25, 1) == math.inf


def test_the_metric_averages_the_per_example_loss_squared_as_keras_evaluates_it():
    """Compiled beside the loss, evaluate's loss and the metric give the eval split's noise: checked against the
    per-example losses computed directly."""
    model = tf_keras.Sequential([tf_keras.layers.Dense(3)])
    per_example = tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    model.compile(
        loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=[squared_loss_metric(per_example)]
    )
    features = np.random.default_rng(1).normal(size=(64, 5)).astype("float32")
    labels = np.arange(64) % 3
    loss, squared = model.evaluate(features, labels, batch_size=16, verbose=0)
    direct = per_example(labels, model(features)).numpy()
    assert math.isclose(loss, direct.mean(), rel_tol=1e-5)
    assert math.isclose(squared, (direct**2).mean(), rel_tol=1e-5)


def test_the_loss_squared_is_noise_and_only_eval_metrics_are_results():
    keys = ["loss", "loss_squared", "accuracy", "val_loss", "val_loss_squared", "val_accuracy", "val_auc"]
    assert [k for k in keys if measures_noise(k)] == ["loss_squared", "val_loss_squared"]
    assert [k for k in keys if eval_result(k)] == ["val_loss", "val_accuracy", "val_auc"]
