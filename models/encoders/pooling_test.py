"""model.pooling resolved against the checkpoint: auto follows a sentence-transformers checkpoint's pooling (the
packaged MiniLM's mean), else the family's own head; a pooling the family's head does not compute is refused."""

import pytest

from models.encoders.from_folder import UnsupportedModelError, read_model_folder
from models.encoders.layers import UnsupportedConfigError
from models.encoders.pooling import choose_pooling, pooled_config


@pytest.mark.parametrize(
    ("choice", "declared", "expected", "reason"),
    [
        ("auto", "mean", "mean", "1_Pooling/config.json) is mean, what its embeddings were trained on"),
        ("auto", "cls", "first", "1_Pooling/config.json) is cls"),
        ("auto", None, None, "no sentence-transformers pooling of the checkpoint's to follow"),
        ("first", "mean", "first", "as configured"),
        ("mean", None, "mean", "as configured"),
    ],
)
def test_auto_follows_the_checkpoints_declared_pooling_and_a_set_one_wins(choice, declared, expected, reason):
    chosen = choose_pooling(choice, "bert", declared)
    assert chosen.pooling == expected and reason in chosen.reason


def test_the_choice_is_written_under_each_familys_own_key_value():
    mean, first = choose_pooling("mean", "bert", None), choose_pooling("first", "eurobert", None)
    assert pooled_config({"model_type": "bert"}, mean)["classifier_pooling"] == "mean"
    assert pooled_config({"model_type": "eurobert"}, first)["classifier_pooling"] == "bos"  # EuroBERT's first token
    own = {"model_type": "eurobert", "classifier_pooling": "late"}
    assert pooled_config(own, choose_pooling("auto", "eurobert", None)) == own  # the family's own, untouched


def test_mean_on_a_family_whose_head_reads_the_first_token_only_is_refused_naming_the_fix():
    with pytest.raises(UnsupportedConfigError, match=r"model\.pooling 'mean' for a deberta-v2 model.*auto or first"):
        choose_pooling("mean", "deberta-v2", None)
    assert choose_pooling("auto", "deberta-v2", "mean").pooling is None  # auto never asks for what it cannot do


def test_the_packaged_minilm_pools_the_mean_under_auto_and_its_folder_says_so(packaged_model_dir):
    folder = read_model_folder(packaged_model_dir, weights=False)
    assert folder.pooling.pooling == "mean" and folder.config["classifier_pooling"] == "mean"
    assert "the head reads the mean of the tokens" in folder.architecture.describe()
    assert read_model_folder(packaged_model_dir, weights=False, pooling="first").config["classifier_pooling"] == "cls"


def test_a_refused_pooling_names_the_folder(family_model_dir):
    with pytest.raises(UnsupportedModelError, match=r"model\.pooling 'mean' for a deberta-v2 model"):
        read_model_folder(family_model_dir("deberta-v2"), weights=False, pooling="mean")


def test_an_architecture_we_do_not_build_is_refused_for_that_before_its_pooling(family_model_dir):
    with pytest.raises(UnsupportedModelError, match="'funnel' model, which cannot be fine-tuned here"):
        read_model_folder(family_model_dir("funnel"), weights=False, pooling="mean")
