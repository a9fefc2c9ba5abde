"""The priors the Trainer judges its losses against are measured as its loss is: on the smoothed targets."""

from types import SimpleNamespace

import pytest

from components.trainer.class_weights import LabelCounts
from components.trainer.config import TrainerSettings
from components.trainer.priors import label_priors
from models.training.chance import prior_loss
from models.training.config import ModelConfig, TrainingConfig


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_the_train_and_eval_priors_follow_the_runs_label_smoothing(smoothing):
    settings = TrainerSettings(
        model=ModelConfig(name="unused"),
        training=TrainingConfig(label_smoothing=smoothing),
        label_names=("fresh", "rotten"),
    )
    counts = LabelCounts(rows=100, tagged=[90, 10])
    priors = label_priors(SimpleNamespace(eval_files=None), settings, None, counts)  # no eval split: the train's
    expected = prior_loss(100, [90, 10], multi_label=False, label_smoothing=smoothing)
    assert priors.train == pytest.approx(expected) and priors.eval == pytest.approx(expected)
    assert (priors.train > prior_loss(100, [90, 10], multi_label=False)) == (smoothing > 0)
