"""Early stopping whose exported model is the best epoch's, and which survives a crash and a resumed run.

Keras' EarlyStopping keeps its best weights and its patience count in memory (lost when a crashed run resumes
from BackupAndRestore's checkpoint) and restores them only when it stops early (a run whose best epoch was
not the last, but which never ran out of patience, exports the last). Here the best weights and the state
are written to a folder beside the training checkpoints at each epoch's end, read back when training
resumes, and the best weights are loaded at the end whichever way training ended.

Nor does it stop on the first plateau: while the training loss has not clearly left the prior's (the label
frequencies' loss, models/training/chance.py), an epoch without improvement does not count against patience. A model
still looking for where the signal is (long pages whose label hangs on one passage) sits there for epochs first.
Nor on noise: under the default min_delta (0), an eval loss within one standard error of the best (the eval split's
noise, models/training/eval_noise.py) is not a regression either. Either way the epochs are a maximum, and the best
epoch is the one exported.
"""

from __future__ import annotations

import json
import os

import tensorflow as tf
import tf_keras

from models.training.chance import left_chance
from models.training.eval_noise import LOSS_SQUARED, loss_noise

STATE_FILE = "state.json"
WEIGHTS_PREFIX = "best"


class BestEpoch(tf_keras.callbacks.Callback):
    """Tracks `monitor` on the eval split per epoch; stops after `patience` epochs without an improvement of more
    than `min_delta`, not counting those whose training loss is still at `train_prior` (None: every epoch counts)
    nor, watching val_loss with no `min_delta`, those within the noise of `eval_examples` of the best; ends
    training with the best epoch's weights loaded."""

    def __init__(
        self,
        monitor: str,
        mode: str,
        patience: int,
        min_delta: float,
        state_dir: str,
        writes: bool = True,
        train_prior: float | None = None,
        eval_examples: int = 0,
    ):
        super().__init__()
        self.train_prior, self.eval_examples = train_prior, eval_examples
        self.held = 0  # epochs without improvement not counted: the training loss was still at the prior's
        self.within_noise = 0  # epochs without improvement not counted: the eval loss within the noise of the best
        self.monitor, self.patience, self.min_delta, self.state_dir = monitor, patience, min_delta, state_dir
        # Under several workers only the chief writes (and exports); the others read its state when resuming.
        self.writes = writes
        self.sign = 1.0 if mode == "min" else -1.0  # compares sign * value: smaller is better
        self.best_value: float | None = None
        self.best_epoch: int | None = None  # 0-based
        self.wait = 0
        self.last_epoch: int | None = None
        self.stopped_early = False

    def on_train_begin(self, logs=None):
        state_path = os.path.join(self.state_dir, STATE_FILE)
        resumed = int(self.model.optimizer.iterations.numpy()) > 0  # BackupAndRestore restored a checkpoint
        if resumed and tf.io.gfile.exists(state_path):
            with tf.io.gfile.GFile(state_path) as handle:
                state = json.load(handle)
            self.best_value, self.best_epoch = state["best_value"], state["best_epoch"]
            self.wait, self.last_epoch, self.held = state["wait"], state["last_epoch"], state.get("held", 0)
            self.within_noise = state.get("within_noise", 0)
            print(
                f"[Trainer] early stopping resumed: best {self.monitor} {self.best_value:.4f} at epoch "
                f"{self.best_epoch + 1}, {self.wait} epoch(s) without improvement",
                flush=True,
            )
        elif self.writes and tf.io.gfile.exists(self.state_dir):  # left by an attempt that did not resume
            tf.io.gfile.rmtree(self.state_dir)

    def improved(self, value: float) -> bool:
        return self.best_value is None or self.sign * (self.best_value - value) > self.min_delta

    def on_epoch_end(self, epoch, logs=None):
        value = (logs or {}).get(self.monitor)
        if value is None:
            raise ValueError(f"early stopping watches '{self.monitor}', which this epoch did not report: {logs}")
        if self.improved(float(value)):
            self.best_value, self.best_epoch, self.wait = float(value), epoch, 0
            if self.writes:
                tf.io.gfile.makedirs(self.state_dir)
                self.model.save_weights(os.path.join(self.state_dir, WEIGHTS_PREFIX))
        elif self._still_at_chance(logs):
            self.held += 1
        elif self._within_noise(float(value), logs):
            self.within_noise += 1
        else:
            self.wait += 1
        self.last_epoch = epoch
        if self.writes:
            self._write_state()
        if self.wait >= self.patience:
            self.stopped_early = epoch + 1 < self.params.get("epochs", epoch + 1)
            self.model.stop_training = True
            print(
                f"[Trainer] early stopping: {self.monitor} has not improved by more than {self.min_delta:g} for "
                f"{self.wait} epoch(s); best was epoch {self.best_epoch + 1} ({self.best_value:.4f})",
                flush=True,
            )

    def _still_at_chance(self, logs: dict) -> bool:
        loss = logs.get("loss")
        if self.train_prior is None or loss is None or left_chance(float(loss), self.train_prior):
            return False
        print(
            f"[Trainer] early stopping waits: the training loss {float(loss):.3f} has not left the prior's "
            f"{self.train_prior:.3f} yet (the model has not found the signal), so this epoch does not count against "
            "patience",
            flush=True,
        )
        return True

    def _within_noise(self, value: float, logs: dict) -> bool:
        squares = logs.get(f"val_{LOSS_SQUARED}")
        if self.monitor != "val_loss" or self.min_delta or squares is None or not self.eval_examples:
            return False  # a min_delta set is the user's own measure of noise
        noise = loss_noise(value, float(squares), self.eval_examples)
        if value - self.best_value > noise:
            return False
        print(
            f"[Trainer] early stopping waits: {self.monitor} {value:.4f} is within the eval split's noise of the best "
            f"{self.best_value:.4f} (one standard error over {self.eval_examples:,} examples: {noise:.4f}), so this "
            "epoch does not count against patience",
            flush=True,
        )
        return True

    def _write_state(self) -> None:
        state = {"best_value": self.best_value, "best_epoch": self.best_epoch, "wait": self.wait, "held": self.held}
        state["within_noise"] = self.within_noise
        with tf.io.gfile.GFile(os.path.join(self.state_dir, STATE_FILE), "w") as handle:
            handle.write(json.dumps({**state, "last_epoch": self.last_epoch}))

    def on_train_end(self, logs=None):
        if not self.writes:
            return  # a worker's weights are not exported; the chief loads the best and removes the state
        if self.best_epoch is not None and self.best_epoch != self.last_epoch:
            self.model.load_weights(os.path.join(self.state_dir, WEIGHTS_PREFIX))
            print(f"[Trainer] restored the best epoch's weights (epoch {self.best_epoch + 1})", flush=True)
        if tf.io.gfile.exists(self.state_dir):
            tf.io.gfile.rmtree(self.state_dir)
