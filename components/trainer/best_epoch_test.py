import numpy as np
import tf_keras

from components.trainer.best_epoch import BestEpoch


def _model():
    model = tf_keras.Sequential([tf_keras.layers.Dense(2)])
    model.build((None, 3))
    model.compile(optimizer="sgd", loss="mse")
    model.optimizer.build(model.trainable_variables)
    return model


def _epoch(callback, model, epoch, value):
    """One epoch's end: the weights become `epoch`'s, validation reported `value`."""
    model.set_weights([np.full(w.shape, float(epoch)) for w in model.get_weights()])
    callback.on_epoch_end(epoch, {"val_loss": value})


def _callback(model, tmp_path, patience=5):
    callback = BestEpoch("val_loss", "min", patience=patience, min_delta=0.01, state_dir=str(tmp_path / "best"))
    callback.set_model(model)
    callback.set_params({"epochs": 4})
    callback.on_train_begin()
    return callback


def test_the_best_epoch_is_exported_even_when_patience_never_ran_out(tmp_path):
    model = _model()
    callback = _callback(model, tmp_path)
    for epoch, value in enumerate([1.0, 0.5, 0.495, 0.7]):  # 0.495 is not better by more than min_delta
        _epoch(callback, model, epoch, value)
    callback.on_train_end()
    assert callback.best_epoch == 1 and not callback.stopped_early and not model.stop_training
    assert all((w == 1.0).all() for w in model.get_weights())
    assert not (tmp_path / "best").exists()


def test_patience_stops_training_and_says_so(tmp_path):
    model = _model()
    callback = _callback(model, tmp_path, patience=2)
    for epoch, value in enumerate([1.0, 0.9, 0.95]):
        _epoch(callback, model, epoch, value)
    assert not model.stop_training
    _epoch(callback, model, 3, 0.92)
    assert model.stop_training and callback.best_epoch == 1 and callback.wait == 2


def test_a_resumed_run_keeps_the_best_epoch_and_patience_of_the_killed_one(tmp_path):
    killed = _model()
    callback = _callback(killed, tmp_path, patience=2)
    _epoch(callback, killed, 0, 1.0)
    _epoch(callback, killed, 1, 1.2)  # the process dies here, after the state of epoch 2 was written
    resumed = _model()
    resumed.optimizer.iterations.assign(120)  # as BackupAndRestore leaves it
    again = _callback(resumed, tmp_path, patience=2)
    assert (again.best_epoch, again.wait, again.best_value) == (0, 1, 1.0)
    _epoch(again, resumed, 2, 1.1)
    assert resumed.stop_training  # two epochs without improvement across the crash
    again.on_train_end()
    assert all((w == 0.0).all() for w in resumed.get_weights())


def test_a_fresh_start_ignores_state_left_by_an_attempt_that_did_not_resume(tmp_path):
    old = _model()
    _epoch(_callback(old, tmp_path), old, 0, 0.1)
    fresh = _model()  # optimizer at step 0: training starts over
    assert _callback(fresh, tmp_path).best_epoch is None
    assert not (tmp_path / "best").exists()


def test_epochs_whose_training_loss_is_still_at_the_prior_do_not_count_against_patience(tmp_path, capsys):
    """The long pages' run: val_loss best at epoch 1 while the training loss sat on the prior's plateau (0.685,
    0.683, 0.674 against 0.693); patience 2 stopped it at chance. Held there, it trains on until the loss leaves the
    plateau, and patience counts from then."""
    model = _model()
    callback = BestEpoch("val_loss", "min", 2, 0.0, str(tmp_path / "best"), train_prior=0.693)
    callback.set_model(model)
    callback.set_params({"epochs": 6})
    callback.on_train_begin()
    for epoch, (loss, value) in enumerate([(0.685, 0.679), (0.683, 0.688), (0.674, 0.681)]):
        model.set_weights([np.full(w.shape, float(epoch)) for w in model.get_weights()])
        callback.on_epoch_end(epoch, {"loss": loss, "val_loss": value})
    assert not model.stop_training and (callback.held, callback.wait) == (2, 0)
    assert "the training loss 0.674 has not left the prior's 0.693" in capsys.readouterr().out
    for epoch, (loss, value) in enumerate([(0.58, 0.70), (0.55, 0.71)], start=3):  # left chance: now it counts
        callback.on_epoch_end(epoch, {"loss": loss, "val_loss": value})
    assert model.stop_training and callback.best_epoch == 0


def test_an_eval_loss_within_the_eval_splits_noise_of_the_best_is_not_a_regression(tmp_path, capsys):
    """The review-after-a-plot run: val_loss 0.683, then 0.688 (up 0.005, within the noise of ~300 pages near chance),
    then 0.655. The rise does not count against patience; a rise past the noise does."""
    model = _model()
    callback = BestEpoch("val_loss", "min", 1, 0.0, str(tmp_path / "best"), eval_examples=300)
    callback.set_model(model)
    callback.set_params({"epochs": 6})
    callback.on_train_begin()
    spread = 0.1  # the per-example loss' standard deviation: one standard error over 300 is 0.0058
    for epoch, value in enumerate([0.683, 0.688, 0.655]):
        model.set_weights([np.full(w.shape, float(epoch)) for w in model.get_weights()])
        callback.on_epoch_end(epoch, {"val_loss": value, "val_loss_squared": value**2 + spread**2})
    assert not model.stop_training and callback.within_noise == 1 and callback.best_epoch == 2
    assert "within the eval split's noise of the best 0.6830" in capsys.readouterr().out
    callback.on_epoch_end(3, {"val_loss": 0.675, "val_loss_squared": 0.675**2 + spread**2})  # 0.02 over: 3.4 errors
    assert model.stop_training and callback.within_noise == 1


def test_without_the_squared_loss_every_epoch_without_improvement_counts(tmp_path):
    model = _model()
    callback = BestEpoch("val_loss", "min", 1, 0.0, str(tmp_path / "best"), eval_examples=300)
    callback.set_model(model)
    callback.set_params({"epochs": 6})
    callback.on_train_begin()
    callback.on_epoch_end(0, {"val_loss": 0.683})
    callback.on_epoch_end(1, {"val_loss": 0.688})
    assert model.stop_training and callback.within_noise == 0
