"""Auto epochs follow the train split's size; early stopping's patience follows the epochs and the eval split."""

import pytest

from models.training.config import EarlyStoppingConfig, TrainingConfig
from models.training.epochs import AUTO_PATIENCE, MAX_AUTO_EPOCHS, choose_epochs, choose_patience


@pytest.mark.parametrize(
    ("examples", "epochs"),
    [(10_246, 1), (10_000, 1), (9_999, 2), (3_400, 3), (808, MAX_AUTO_EPOCHS), (19, MAX_AUTO_EPOCHS), (0, 10)],
)
def test_auto_epochs_train_on_ten_thousand_examples_within_ten_passes(examples, epochs):
    assert choose_epochs("auto", examples).epochs == epochs


def test_the_default_runs_split_keeps_its_one_epoch_and_says_why():
    choice = choose_epochs(TrainingConfig().epochs, 10_246)
    assert choice.describe() == "at most 1 epoch(s) (auto: 10,246 train examples, at least 10,000 in one pass)"
    assert choose_epochs("auto", 808).reason == "auto: 808 train examples: 10 passes, the most auto chooses"
    assert choose_epochs("auto", 3_400).reason == "auto: 3,400 train examples: 3 passes, to see 10,000 examples"


def test_a_number_in_the_config_wins():
    assert choose_epochs(4, 100).epochs == 4 and choose_epochs("4", 1_000_000).epochs == 4


@pytest.mark.parametrize(
    ("patience", "epochs", "has_eval", "chosen", "why"),
    [
        ("auto", 10, True, 3, "a quarter of 10 epochs"),
        ("auto", 5, True, AUTO_PATIENCE, "epochs are a maximum"),
        ("auto", 40, True, 10, "a quarter of 40 epochs"),
        ("auto", 1, True, 0, "one epoch"),
        ("auto", 10, False, 0, "the eval split is empty"),
        (0, 10, True, 0, "training.early_stopping.patience"),
        (3, 10, True, 3, "training.early_stopping.patience"),
    ],
)
def test_early_stopping_is_on_by_default_where_it_can_choose(patience, epochs, has_eval, chosen, why):
    choice = choose_patience(EarlyStoppingConfig(patience=patience), epochs, has_eval)
    assert choice.patience == chosen and why in choice.reason


def test_an_explicit_patience_without_eval_examples_is_refused():
    with pytest.raises(ValueError, match="needs eval examples to watch"):
        choose_patience(EarlyStoppingConfig(patience=2), 5, has_eval=False)


def test_explicit_patience_still_needs_explicit_epochs_to_choose_among():
    with pytest.raises(ValueError, match=r"needs training\.epochs >= 2"):
        TrainingConfig(epochs=1, early_stopping={"patience": 1})
    assert TrainingConfig(early_stopping={"patience": 1}).epochs == "auto"  # the Trainer chooses


def test_long_texts_and_few_examples_get_the_plateaus_epochs_under_auto():
    from models.training.long_and_few import PLATEAU_EPOCHS, TrainTexts

    pages = TrainTexts(268, 2_397)  # 5 passes would see 10,000 examples; such pages left the prior in their 4th
    choice = choose_epochs("auto", 2_397, pages)
    assert choice.epochs == PLATEAU_EPOCHS == 10 and choice.reason.startswith("auto: long texts (median 268 tokens)")
    assert choose_epochs("auto", 2_397, TrainTexts(27, 2_397)).epochs == 5  # short reviews: as many as before
    assert choose_epochs(5, 2_397, pages).epochs == 5  # a number in the config wins
