import pytest

from models.training.warm_start import (
    WarmStartError,
    choose_start,
    describe_warm_recipe,
    warm_epochs,
    warm_learning_rate,
)

MINILM = {"model_type": "bert", "hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12,
          "intermediate_size": 1536, "vocab_size": 30522}  # fmt: skip


def test_a_blessed_model_of_the_same_encoder_is_the_start_unless_never():
    warm = choose_start("auto", "packaged:all-MiniLM-L6-v2", MINILM, "/root/Trainer/model/5/hf", dict(MINILM))
    assert warm.warm and warm.source == "/root/Trainer/model/5/hf"
    assert warm.describe() == (
        "warm start from the blessed model /root/Trainer/model/5/hf (training.warm_start: auto; same task and encoder)"
    )
    never = choose_start("never", "m", MINILM, "/root/Trainer/model/5/hf", dict(MINILM))
    assert not never.warm and never.source == "m" and never.reason == "training.warm_start: never"
    first = choose_start("always", "m", MINILM, None, None)
    assert not first.warm and first.reason == "training.warm_start: always; no blessed model of this task yet"


def test_another_encoder_starts_cold_under_auto_and_is_refused_under_always():
    wider = {**MINILM, "hidden_size": 768, "num_hidden_layers": 12}
    cold = choose_start("auto", "bert-base-uncased", wider, "/b/hf", MINILM)
    assert not cold.warm and "hidden_size 384 -> 768; num_hidden_layers 6 -> 12" in cold.reason
    with pytest.raises(WarmStartError, match=r"another encoder .*Set training.warm_start: auto \(or never\)"):
        choose_start("always", "bert-base-uncased", wider, "/b/hf", MINILM)


def test_a_warm_start_takes_half_the_learning_rate_and_a_third_of_the_auto_epochs():
    assert warm_learning_rate(5e-5) == pytest.approx(2.5e-5)
    assert [warm_epochs(n) for n in (1, 2, 3, 4, 10)] == [1, 1, 1, 2, 4]
    said = describe_warm_recipe(5e-5, 10, epochs_auto=True)
    assert said.startswith("learning rate 2.5e-05 (half the cold recipe's 5e-05) and at most 4 epoch(s), a third")
    assert "the epochs as set" in describe_warm_recipe(5e-5, 10, epochs_auto=False)
