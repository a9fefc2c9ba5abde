"""Every family module keeps the written contract, and a module missing a part of it is named with the part."""

import types

import pytest

from models.encoders import bert_family, classifier
from models.encoders.family import FamilySizes, missing_parts


@pytest.mark.parametrize("model_type", sorted(classifier.ARCHITECTURES))
def test_every_family_module_keeps_the_contract(model_type):
    module, _ = classifier.ARCHITECTURES[model_type]
    assert missing_parts(module) == []


def test_a_module_missing_part_of_the_contract_is_named_with_the_part():
    parts = {name: getattr(bert_family, name) for name in dir(bert_family) if not name.startswith("_")}
    del parts["warmup_ratio"]
    assert missing_parts(types.SimpleNamespace(**parts)) == ["warmup_ratio"]

    class SizesWithoutActivations:
        vocab = hidden = intermediate = heads = positions = layers = 1
        block_dropout = None

    parts.update(warmup_ratio=bert_family.warmup_ratio, Sizes=SizesWithoutActivations)
    assert missing_parts(types.SimpleNamespace(**parts)) == ["Sizes.activations", "Sizes.of"]


def test_each_familys_sizes_answer_the_contract_for_a_real_config(tiny_bert_dir):
    import json

    config = json.loads((tiny_bert_dir / "config.json").read_text())
    sizes = classifier.module_for(config).Sizes.of(config)
    assert isinstance(sizes, FamilySizes)
    assert sizes.activations == (config["hidden_act"],) and sizes.block_dropout is None
