"""The recipe's `auto` settings follow the encoder's size and family; numbers in the config win."""

import pytest
from transformers import BertConfig, RobertaConfig

from models.encoders.classifier import encoder_shape
from models.hardware.flops import EncoderShape
from models.training.config import TrainingConfig
from models.training.recipe import choose_recipe, encoder_parameters


def _shape(config) -> EncoderShape:
    return encoder_shape(config.to_dict(), 2)


MINILM_L6 = BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)


def test_encoder_parameters_count_the_layers_not_the_vocabulary():
    assert encoder_parameters(_shape(BertConfig())) == pytest.approx(85e6, rel=0.01)  # BERT-base: 110M with embeddings
    assert encoder_parameters(_shape(MINILM_L6)) == pytest.approx(10.6e6, rel=0.01)
    big_vocab = BertConfig(vocab_size=250_002)  # XLM-R's vocabulary on a base encoder: the same layers
    assert encoder_parameters(_shape(big_vocab)) == encoder_parameters(_shape(BertConfig()))


def test_minilm_keeps_the_rate_the_default_run_was_tuned_at():
    recipe = choose_recipe(_shape(MINILM_L6), "bert", TrainingConfig())
    assert (recipe.learning_rate, recipe.warmup_ratio, recipe.clip_norm) == (1e-4, 0.1, None)
    assert "chosen for a bert encoder with 11M parameters" in recipe.describe() and "no clipping" in recipe.describe()


@pytest.mark.parametrize(
    ("config", "model_type", "rate", "warmup"),
    [
        (BertConfig(), "bert", 3e-5, 0.1),
        (RobertaConfig(), "roberta", 3e-5, 0.06),
        (
            BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
            "bert",
            1e-5,
            0.1,
        ),
    ],
)
def test_base_and_large_encoders_get_their_papers_rates_and_clipping(config, model_type, rate, warmup):
    recipe = choose_recipe(_shape(config), model_type, TrainingConfig())
    assert (recipe.learning_rate, recipe.warmup_ratio, recipe.clip_norm) == (rate, warmup, 1.0)
    assert recipe.learning_rate <= 5e-5 and "clipped at global norm 1" in recipe.describe()


def test_numbers_in_the_config_win_and_the_reason_says_which_were_chosen():
    training = TrainingConfig(learning_rate=5e-5, gradient_clip_norm=None)
    recipe = choose_recipe(_shape(BertConfig()), "bert", training)
    assert (recipe.learning_rate, recipe.warmup_ratio, recipe.clip_norm) == (5e-5, 0.1, None)
    assert recipe.reason.startswith("warm-up chosen for") and "the rest as the config gives them" in recipe.reason
    # the size row's why is its rate's: a rate set in the config is not explained by it
    assert recipe.reason.endswith("in its layers: a base-size encoder; the rest as the config gives them")
    assert not recipe.rate_chosen and choose_recipe(_shape(BertConfig()), "bert", TrainingConfig()).rate_chosen
    fixed = TrainingConfig(learning_rate=2e-5, warmup_ratio=0.0, gradient_clip_norm=0.5)
    assert choose_recipe(None, "", fixed).reason == "as the config gives them"
    assert choose_recipe(None, "", TrainingConfig()).learning_rate == 3e-5  # size unknown: the base row


def test_a_rate_the_trainer_set_is_explained_as_its_not_as_the_configs():
    warm = "halved from the cold recipe's 0.0001 for a warm start from the blessed model"
    halved = choose_recipe(_shape(MINILM_L6), "bert", TrainingConfig(learning_rate=5e-5), rate_reason=warm)
    assert halved.learning_rate == 5e-5 and not halved.rate_chosen
    assert halved.reason.startswith("warm-up, clipping chosen for a bert encoder with 11M parameters")
    assert halved.reason.endswith(f"; learning rate {warm}") and "config" not in halved.reason
    fixed = TrainingConfig(learning_rate=2e-5, warmup_ratio=0.0, gradient_clip_norm=0.5)
    tuned = choose_recipe(None, "", fixed, rate_reason="from the Tuner's best trial").reason
    assert tuned == "learning rate from the Tuner's best trial; the rest as the config gives them"
    auto = choose_recipe(_shape(MINILM_L6), "bert", TrainingConfig(), rate_reason=warm)  # an auto rate: the row's why
    assert auto.learning_rate == 1e-4 and warm not in auto.reason


def test_long_texts_and_few_examples_lower_an_auto_rate_to_the_plateaus_and_never_raise_one():
    from models.training.long_and_few import PLATEAU_RATE, TrainTexts

    pages = TrainTexts(268, 2_397)  # make bench-long's review-between pages: 1e-4 never left the prior, 3e-5 did
    recipe = choose_recipe(_shape(MINILM_L6), "bert", TrainingConfig(), pages)
    assert recipe.learning_rate == PLATEAU_RATE == 3e-5 and recipe.rate_chosen
    assert "lowered to 3e-05 for long texts (median 268 tokens) and few examples (2,397 train texts)" in recipe.reason
    for other in (TrainTexts(27, 2_397), TrainTexts(268, 20_000), TrainTexts(268, None)):  # short; many; not counted
        assert choose_recipe(_shape(MINILM_L6), "bert", TrainingConfig(), other).learning_rate == 1e-4
    large = BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096)
    assert choose_recipe(_shape(large), "bert", TrainingConfig(), pages).learning_rate == 1e-5  # slower already
    base = choose_recipe(_shape(BertConfig()), "bert", TrainingConfig(), pages)
    assert base.learning_rate == 3e-5 and "lowered" not in base.reason
    assert choose_recipe(_shape(MINILM_L6), "bert", TrainingConfig(learning_rate=1e-4), pages).learning_rate == 1e-4
