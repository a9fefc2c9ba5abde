"""The Trainer's progress lines: steps, loss, accuracy, examples/s and model FLOP/s against the machine's peak."""

from __future__ import annotations

import time

import tf_keras

from components.trainer.attempts import AttemptLog
from components.trainer.training_meter import TrainingMeter
from components.trainer.training_record import rate_text
from models.training.eval_noise import measures_noise

# Where one replica trains (its metrics read without an all-reduce), a line at least this often whatever
# log_every_steps says: a step of ModernBERT-base at 8,192 tokens takes a minute, 25 of them half an hour.
SILENT_SECONDS = 60.0


class ProgressLogger(tf_keras.callbacks.Callback):
    """One readable line every few steps (and at least every SILENT_SECONDS where one replica trains): progress,
    loss, accuracy, examples/s, model FLOP/s against the machine's matmul peak, and time left. Validation time is
    not training time: it is left out of the rates."""

    def __init__(
        self,
        total_steps: int,
        global_batch: int,
        every: int,
        meter: TrainingMeter | None = None,
        attempts: AttemptLog | None = None,
    ):
        super().__init__()
        self.total_steps, self.global_batch, self.every = total_steps, global_batch, max(1, every)
        self.meter, self.attempts = meter, attempts  # attempts: the chief's log of restarts, None elsewhere
        self.step = 0
        self.examples_per_second = 0.0
        self.validation_seconds = 0.0

    def on_train_begin(self, logs=None):
        self.started = self.last_line = time.monotonic()
        # Several replicas log at the same steps only (running_metrics' all-reduce must happen on every worker).
        self.alone = self.model.distribute_strategy.num_replicas_in_sync == 1
        # BackupAndRestore has restored the optimizer by now: its step count says where training resumes.
        self.step = self.initial_step = int(self.model.optimizer.iterations.numpy())
        if self.step:
            redone = ""
            if self.attempts is not None:
                entry = self.attempts.resumed(self.step)
                redone = f"; about {entry['redone_steps']} step(s) ({entry['redone_seconds']:.0f}s) to train again"
            print(f"[Trainer] resumed from the checkpoint at step {self.step}/{self.total_steps}{redone}", flush=True)
        elif self.attempts is not None:
            self.attempts.started_anew()

    def on_test_begin(self, logs=None):
        self.validation_started = time.monotonic()

    def on_test_end(self, logs=None):
        self.validation_seconds += time.monotonic() - self.validation_started

    @property
    def training_seconds(self) -> float:
        return time.monotonic() - self.started - self.validation_seconds

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        done_here = self.step - self.initial_step
        if self.meter is not None:
            self.meter.steps, self.meter.seconds = done_here, self.training_seconds
        if not self._line_due():
            return
        self.last_line = time.monotonic()
        elapsed = self.training_seconds
        self.examples_per_second = done_here * self.global_batch / max(elapsed, 1e-9)
        left = (self.total_steps - self.step) * elapsed / max(done_here, 1)
        logs = self.running_metrics()
        utilization = f"| {self.meter.describe(done_here, elapsed)} " if self.meter is not None else ""
        if self.attempts is not None:
            self.attempts.reached(self.step, elapsed / max(done_here, 1))
        print(
            f"[Trainer] step {self.step}/{self.total_steps} ({self.step / self.total_steps:.0%}) "
            f"loss {logs.get('loss', float('nan')):.4f} accuracy {logs.get('accuracy', float('nan')):.3f} "
            f"| {rate_text(self.examples_per_second)} {utilization}| {elapsed:.0f}s training, ~{left:.0f}s left",
            flush=True,
        )

    def _line_due(self) -> bool:
        if self.step % self.every == 0 or self.step == self.total_steps:
            return True
        return self.alone and time.monotonic() - self.last_line >= SILENT_SECONDS

    def running_metrics(self) -> dict[str, float]:
        """The epoch's running loss and metrics over every replica. Keras' batch `logs` sum each replica's own
        means under a strategy with several replicas (its "auto" reduction is "sum" off TPUs): 2x the loss on
        two workers. Read here, the metrics' variables are aggregated across replicas (every worker logs at the
        same steps, so the all-reduce this read makes under MultiWorkerMirroredStrategy happens on all)."""
        return {metric.name: float(metric.result()) for metric in self.model.metrics}

    def on_epoch_begin(self, epoch, logs=None):
        self.validation_seconds_before_epoch = self.validation_seconds

    def on_epoch_end(self, epoch, logs=None):
        shown = ", ".join(f"{k} {v:.4f}" for k, v in sorted((logs or {}).items()) if not measures_noise(k))
        validation = self.validation_seconds - self.validation_seconds_before_epoch
        timing = f" (validation {validation:.1f}s)" if validation else ""
        print(f"[Trainer] epoch {epoch + 1} done: {shown}{timing}", flush=True)
