"""The prior's loss is what a model answering the label frequencies scores, weighted as Keras weighs the loss."""

import math

import pytest

from models.training.chance import prior_loss, verdict


def test_the_prior_is_the_label_frequencies_entropy_and_balanced_weights_make_it_log_k():
    assert prior_loss(100, [50, 50], multi_label=False) == pytest.approx(math.log(2))
    assert prior_loss(100, [90, 10], multi_label=False) == pytest.approx(-(0.9 * math.log(0.9) + 0.1 * math.log(0.1)))
    balanced = {0: 100 / (3 * 80), 1: 100 / (3 * 15), 2: 100 / (3 * 5)}  # scikit-learn's n / (K x n_class)
    assert prior_loss(100, [80, 15, 5], multi_label=False, weights=balanced) == pytest.approx(math.log(3))
    # multi-label: the mean binary cross-entropy of answering each label's rate
    assert prior_loss(10, [5, 0], multi_label=True) == pytest.approx(math.log(2) / 2)


def test_smoothed_labels_raise_the_prior_where_the_labels_are_unbalanced_as_keras_smooths_them():
    """Keras' loss against targets smoothed by s: the best constant answer is the smoothed frequencies (found here
    by scanning the answers), so a model at chance is not judged against the plain prior's lower loss."""
    s = 0.1
    smoothed = [0.9 * (1 - s) + s / 2, 0.1 * (1 - s) + s / 2]

    def constant_answer_loss(q):  # the mean smoothed cross-entropy over 90 rows of label 0 and 10 of label 1
        return -sum(share * math.log(answer) for share, answer in zip(smoothed, (q, 1 - q), strict=True))

    best = min(constant_answer_loss(q / 1000) for q in range(1, 1000))
    assert prior_loss(100, [90, 10], multi_label=False, label_smoothing=s) == pytest.approx(best, abs=1e-5)
    assert prior_loss(100, [90, 10], multi_label=False, label_smoothing=s) > prior_loss(100, [90, 10], False)
    assert prior_loss(100, [50, 50], multi_label=False, label_smoothing=s) == pytest.approx(math.log(2))
    # multi-label targets pulled toward 0.5: the label never tagged scores its smoothed rate's entropy, not 0
    assert prior_loss(10, [5, 0], multi_label=True, label_smoothing=s) == pytest.approx(
        (math.log(2) - (0.05 * math.log(0.05) + 0.95 * math.log(0.95))) / 2
    )


def test_the_verdict_judges_the_eval_loss_and_says_what_to_try_in_order():
    stuck = verdict({"loss": [0.68, 0.66], "val_loss": [0.679, 0.688]}, 0.693, 0.693)
    assert not stuck.left
    assert stuck.describe(0.62) == (
        "the model did not leave chance (val_loss 0.679 against the prior's 0.693); try, in this order: more epochs "
        "(--epochs), a lower learning rate (--learning-rate); --long-texts windows or head_tail: 62% of the train "
        "texts were cut"
    )
    # the run's rate known: the rate to try is about a third of it (1e-4 stuck, 3e-5 left: make bench-long)
    assert "a lower learning rate (--learning-rate 3e-05, about a third of this run's 0.0001)" in stuck.describe(
        learning_rate=1e-4
    )
    assert "(--learning-rate 7e-06, about a third of this run's 2e-05)" in stuck.describe(learning_rate=2e-5)
    # the policy that cut them is not among the tries (a windows run stuck at chance on the review-between pages
    # was told to try windows)
    assert stuck.describe(0.07, "head_tail").endswith("; --long-texts windows: 7% of the train texts were cut")
    assert stuck.describe(0.07, "windows").endswith(
        "; more windows (model.max_windows): 7% of the train texts were cut"
    )
    # the training texts fit while the held-out ones stay at the prior: more epochs is not a try (bench-long's review
    # between pages at 3e-5, seed 43: train loss 0.23, val_loss 0.681, early stopping ended the run)
    overfit = verdict({"loss": [0.69, 0.52, 0.23], "val_loss": [0.69, 0.681, 0.91]}, 0.693, 0.693)
    assert not overfit.left and overfit.fit_train == 0.23
    assert overfit.describe(0.08, learning_rate=3e-5) == (
        "the model did not leave chance on held-out texts (val_loss 0.681 against the prior's 0.693) though it fit "
        "the training texts (loss 0.230): what it learned does not carry over; try, in this order: a lower learning "
        "rate (--learning-rate 1e-05, about a third of this run's 3e-05), more training examples; --long-texts "
        "windows or head_tail: 8% of the train texts were cut"
    )
    assert stuck.fit_train is None, "0.66 is within the margin of the prior: still on the plateau"
    learned = verdict({"loss": [0.6, 0.4], "val_loss": [0.62, 0.45]}, 0.693, 0.693)
    assert learned.left and learned.describe() == "left chance: val_loss 0.450 against the prior's 0.693"
    assert not verdict({"loss": [0.69]}, 0.693, math.nan).left, "no eval split: the training loss is judged"


def test_check_warns_of_the_plateau_only_for_long_texts_and_few_examples():
    from models.training.chance import plateau_risk
    from models.training.long_and_few import TrainTexts

    pages = TrainTexts(512, 3000)
    assert "long texts (median 512 tokens) and few examples (3,000 train texts)" in plateau_risk(pages)
    assert plateau_risk(TrainTexts(64, 3000)) is None  # short reviews: the default run
    # many examples; sizes unknown
    assert plateau_risk(TrainTexts(512, 50_000)) is None and plateau_risk(TrainTexts(512, None)) is None
    assert plateau_risk(pages).endswith("give it epochs (--epochs 10)")  # epochs not known yet
    assert plateau_risk(pages, 5).endswith("give it epochs (--epochs 10: this run has 5 at most)")
    assert plateau_risk(pages, 10).endswith("this run's 10 epochs leave it room")  # auto's, or asked for already
