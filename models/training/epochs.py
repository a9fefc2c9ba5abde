"""How many passes over the train split, chosen from its size, and when early stopping ends them sooner.

One epoch suits the default run (10,246 review snippets reach their accuracy in one pass, `make bench-seeds`) but
not a user's 800 documents: 25 optimizer steps leave a fine-tuned encoder near where it started. Fine-tuning
fails on small datasets mostly from too few optimizer steps (Mosbach et al. 2021, "On the stability of fine-tuning
BERT"; Zhang et al. 2021, "Revisiting few-sample BERT fine-tuning": training longer than 3 epochs fixes most
failed runs). So `epochs: auto` passes over a small split until training has seen MIN_EXAMPLES_SEEN examples, at
most MAX_AUTO_EPOCHS times, and the epochs are a maximum: early stopping on the eval split (on by default where
there is one) ends training once the eval loss stops improving and exports the best epoch's weights.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from models.config_section import AUTO
from models.training.long_and_few import PLATEAU_EPOCHS, TrainTexts

MIN_EXAMPLES_SEEN = 10_000  # the default run's train split, rounded: it keeps its one epoch
MAX_AUTO_EPOCHS = 10
AUTO_PATIENCE = 2  # epochs without improvement, at least: one noisy epoch does not end training
PATIENCE_SHARE = 0.25  # of the epochs at most: a longer schedule's plateaus are longer too


@dataclasses.dataclass(frozen=True)
class EpochChoice:
    epochs: int  # at most: early stopping may end training sooner
    reason: str

    def describe(self) -> str:
        return f"at most {self.epochs} epoch(s) ({self.reason})"


@dataclasses.dataclass(frozen=True)
class StoppingChoice:
    patience: int  # 0: off
    reason: str

    def describe(self, metric: str) -> str:
        if not self.patience:
            return f"early stopping off ({self.reason})"
        return f"early stopping after {self.patience} epoch(s) without a better {metric} ({self.reason})"


def choose_epochs(requested: int | str, train_examples: int, texts: TrainTexts | None = None) -> EpochChoice:
    """training.epochs, or under auto the fewest epochs that show training MIN_EXAMPLES_SEEN examples, between 1
    and MAX_AUTO_EPOCHS. `train_examples`: what one epoch trains on (a text's windows count one each). `texts`: the
    train split's, where known: long texts and few examples get PLATEAU_EPOCHS (models/training/long_and_few.py)."""
    if requested != AUTO:
        return EpochChoice(int(requested), "training.epochs")
    epochs = min(MAX_AUTO_EPOCHS, max(1, math.ceil(MIN_EXAMPLES_SEEN / max(1, train_examples))))
    if texts is not None and texts.plateau_prone and epochs < PLATEAU_EPOCHS:
        return EpochChoice(
            PLATEAU_EPOCHS,
            f"auto: {texts.describe()}: room to leave the prior's loss, which such pages took 3 "
            "epochs to leave (make bench-long), and to learn after it",
        )
    seen = f"auto: {train_examples:,} train examples"
    if epochs == 1:
        return EpochChoice(1, f"{seen}, at least {MIN_EXAMPLES_SEEN:,} in one pass")
    bound = "the most auto chooses" if epochs == MAX_AUTO_EPOCHS else f"to see {MIN_EXAMPLES_SEEN:,} examples"
    return EpochChoice(epochs, f"{seen}: {epochs} passes, {bound}")


def choose_patience(stopping: Any, epochs: int, has_eval: bool) -> StoppingChoice:
    """training.early_stopping.patience, or under auto a PATIENCE_SHARE of the epochs (at least AUTO_PATIENCE) when
    there are epochs to choose among and an eval split to choose with. An explicit patience without eval examples
    is an error (it cannot be honoured)."""
    if stopping.patience != AUTO:
        if stopping.patience and not has_eval:
            raise ValueError("training.early_stopping needs eval examples to watch; the eval split is empty")
        return StoppingChoice(int(stopping.patience), "training.early_stopping.patience")
    if not has_eval:
        return StoppingChoice(0, "auto: the eval split is empty, so nothing to choose the best epoch with")
    if epochs < 2:
        return StoppingChoice(0, "auto: one epoch, nothing to choose among")
    patience = max(AUTO_PATIENCE, math.ceil(PATIENCE_SHARE * epochs))
    why = f"auto: a quarter of {epochs} epochs, at least {AUTO_PATIENCE}; epochs are a maximum, the best is exported"
    return StoppingChoice(patience, why)
