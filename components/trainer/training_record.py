"""What the Trainer decided, written beside its logs for the run summary: epochs run, the best epoch and why
training stopped, the class weights it used."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

RECORD_FILE = "training_record.json"


def describe_values(values: dict[str, Any]) -> str:
    """`batch_size 16, learning_rate 7.44e-05`: training settings as a person reads them (3 significant digits)."""
    return ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in values.items())


@dataclasses.dataclass
class TrainingRecord:
    epochs: int  # at most: set, or chosen from the train split's size
    epochs_run: int
    epochs_reason: str = ""  # why at most `epochs` (models.training.epochs.EpochChoice)
    stopping_reason: str = ""  # whether early stopping watched, and why (models.training.epochs.StoppingChoice)
    class_weights: dict[str, float] | None = None  # by label name; None: unweighted
    class_weight_setting: str = "none"  # none | balanced | mapping
    monitor: str = ""  # the early-stopping metric; '' when early stopping was off
    best_epoch: int | None = None  # 1-based; the epoch whose weights were exported
    best_value: float | None = None
    stopped_early: bool = False
    held: int = 0  # epochs without improvement not counted against patience: the training loss still at the prior's
    within_noise: int = 0  # ... nor these: the eval loss within the eval split's noise of the best
    patience: int = 0
    min_delta: float = 0.0
    tuned: dict | None = None  # the Tuner's best trial's values the Trainer trained with; None: no Tuner
    exported_eval: dict | None = None  # the eval split's metrics (val_loss, val_accuracy) of the exported epoch
    workers: int = 1  # machines that trained in lock-step (MultiWorkerMirroredStrategy past 1)
    resumes: list[dict] = dataclasses.field(default_factory=list)  # each restart: at_step, redone_steps, redone_seconds
    started_from: str = ""  # the checkpoint fine-tuned from: the pretrained model, or a warm start's blessed model
    start_reason: str = ""  # why (models/training/warm_start.py StartChoice)
    warm: bool = False  # started from a blessed model
    learning_rate: float | None = None  # the peak learning rate trained with (tuned, or halved by a warm start)
    recipe: str = ""  # that rate, the warm-up and clipping, and why (models/training/recipe.py RecipeChoice.describe)
    pooling: str = ""  # which tokens the head read, and why (models/encoders/pooling.py PoolingChoice.describe)
    chance: str = ""  # whether the exported model left chance, and what to try if not (models/training/chance.py)
    # an epoch more accurate on the eval split than the one val_loss exported, beyond noise (training/exported_epoch.py)
    more_accurate: str = ""

    def describe_resumes(self) -> str:
        """How often training resumed from its checkpoint (a crash, a preempted spot machine) and the work redone."""
        if not self.resumes:
            return "none: trained in one attempt"
        redone = sum(r["redone_steps"] for r in self.resumes)
        seconds = sum(r["redone_seconds"] for r in self.resumes)
        steps = ", ".join(str(r["at_step"]) for r in self.resumes)
        return (
            f"{len(self.resumes)} time(s), from the checkpoints at step(s) {steps}; about {redone} step(s) "
            f"({seconds:.0f}s) trained again"
        )

    def describe_start(self) -> str:
        """The checkpoint training started from and why (models/training/warm_start.py)."""
        kind = "the blessed model" if self.warm else "the pretrained"
        return f"{kind} {self.started_from}" + (f" ({self.start_reason})" if self.start_reason else "")

    def describe_epochs(self) -> str:
        limit = f"at most {self.epochs}" + (f" ({self.epochs_reason})" if self.epochs_reason else "")
        if not self.monitor:
            stopping = self.stopping_reason or "early stopping off"
            return f"{self.epochs_run} epoch(s) ran, {limit}; the last one exported: {stopping}"
        exported = f"epoch {self.best_epoch} exported: best {self.monitor} {self.best_value:.4f}"
        not_counted = [
            f"{self.held} with the training loss still at the prior's" if self.held else "",
            f"{self.within_noise} with the eval loss within its noise of the best" if self.within_noise else "",
        ]
        held = "; not counted against patience: " + ", ".join(filter(None, not_counted)) if any(not_counted) else ""
        if self.stopped_early:
            return (
                f"stopped after epoch {self.epochs_run}, {limit}: {self.monitor} did not improve by more than "
                f"{self.min_delta:g} for {self.patience} epoch(s){held}; {exported}"
            )
        return f"all {self.epochs_run} epochs ran, {limit}{held}; {exported}"

    def describe_class_weights(self) -> str:
        if not self.class_weights:
            return "none (every example weighs 1)"
        shown = ", ".join(f"{name} {weight:.3f}" for name, weight in self.class_weights.items())
        return f"{self.class_weight_setting}: {shown}"

    def write(self, directory: str) -> None:
        import tensorflow as tf

        with tf.io.gfile.GFile(os.path.join(directory, RECORD_FILE), "w") as handle:
            handle.write(json.dumps(dataclasses.asdict(self), indent=2, ensure_ascii=False))

    @classmethod
    def read(cls, directory: str) -> TrainingRecord | None:
        path = os.path.join(directory, RECORD_FILE)
        if not os.path.isfile(path):
            return None
        with open(path, encoding="utf-8") as handle:
            return cls(**json.load(handle))


def rate_text(examples_per_second: float) -> str:
    """93.8 examples/s, or where an example takes longer than a second: 120 s an example (0.0/s says nothing)."""
    if examples_per_second >= 1 or examples_per_second <= 0:
        return f"{examples_per_second:.1f} examples/s"
    return f"{1 / examples_per_second:.0f} s an example"
