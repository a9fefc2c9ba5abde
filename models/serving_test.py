"""How `hftfx predict` reads sentence pairs and shows predictions, without a model."""

import pytest

from models.serving import Prediction, prediction_lines, split_pairs
from models.serving_contract import BadRequestError


def test_pairs_split_at_the_first_separator_and_a_line_without_one_is_refused():
    assert split_pairs(["a\tb", "c\td\te"], "\t", "m") == (["a", "c"], ["b", "d\te"])
    with pytest.raises(BadRequestError, match=r"serving/m classifies sentence pairs: .*'\\t'.*--pair-separator"):
        split_pairs(["a\tb", "no pair here"], "\t", "serving/m")


def test_predictions_show_label_confidence_probabilities_and_the_shortened_texts():
    single = Prediction("x" * 80, "fresh", 1, 0.912, (0.088, 0.912))
    pair = Prediction("first text", "entailment", 0, 0.5, (0.5, 0.3, 0.2), text_pair="y" * 40)
    lines = prediction_lines([single, pair])
    assert lines[0] == "  fresh        91.2%  [0.09  0.91]  " + "x" * 67 + "..."
    assert lines[1] == "  entailment   50.0%  [0.50  0.30  0.20]  first text  |  " + "y" * 31 + "..."
