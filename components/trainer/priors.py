"""The loss of a model that knows only the label frequencies, on the splits the Trainer reads: what early stopping
and the run's verdict compare the losses with (models/training/chance.py)."""

from __future__ import annotations

import dataclasses

from components.trainer.class_weights import LabelCounts, train_label_counts
from components.trainer.config import TrainerSettings
from models.training import chance
from models.training.chance import prior_loss


@dataclasses.dataclass(frozen=True)
class Priors:
    """The loss of answering the label frequencies (models/training/chance.py): the train split's under the class
    weights (what the training loss is measured with), the eval split's unweighted (as Keras' val_loss)."""

    train: float
    eval: float
    truncated_share: float = 0.0  # of the train texts, cut to the width: a cut passage may hold the signal
    long_texts: str = "truncate"  # the policy that cut them (model.long_texts): the tries are the others

    def verdict(self, history, learning_rate: float | None = None) -> str:
        """Whether Keras' `history` left chance, and what to try if not (a lower rate than the run's
        `learning_rate`, the cut texts' share)."""
        found = chance.verdict(history.history, self.train, self.eval)
        return found.describe(self.truncated_share, self.long_texts, learning_rate)


def label_priors(fn_args, settings: TrainerSettings, weights: dict[int, float] | None, train: LabelCounts) -> Priors:
    """From the train split's counts (the Trainer's, which the class weights read too) and the eval split's."""
    labels, multi = len(settings.label_names), settings.multi_label
    smoothing = settings.training.label_smoothing  # both losses are measured against the smoothed targets
    evaluated = train_label_counts(fn_args.eval_files, labels, multi) if fn_args.eval_files else train
    return Priors(
        prior_loss(train.rows, train.tagged, multi, None if multi else weights, smoothing),
        prior_loss(evaluated.rows, evaluated.tagged, multi, label_smoothing=smoothing),
        train.truncated_share,
        settings.model.long_texts,
    )
