"""The BERT family beside its module: each flavor's config names read into one set of sizes, and what it refuses
(parity with transformers 5 for every flavor: tests/encoder_parity_test.py)."""

import pytest

from models.encoders import classifier
from models.encoders.bert_family import Sizes
from models.encoders.layers import UnsupportedConfigError

SMALL = {"vocab_size": 50, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 2}


def test_distilberts_own_names_read_as_every_flavors():
    distil = {"model_type": "distilbert", "vocab_size": 50, "dim": 16, "hidden_dim": 24, "n_layers": 3, "n_heads": 2,
              "max_position_embeddings": 64}  # fmt: skip
    sizes = Sizes.of(distil)
    assert (sizes.hidden, sizes.intermediate, sizes.layers, sizes.heads, sizes.token_types) == (16, 24, 3, 2, 0)
    assert classifier.encoder_shape(distil, 2).layers == 3


def test_robertas_positions_count_from_the_padding_id():
    roberta = {"model_type": "roberta", "max_position_embeddings": 514, "pad_token_id": 1, **SMALL}
    assert classifier.position_limit(roberta) == 512
    assert classifier.position_limit({**roberta, "model_type": "bert", "pad_token_id": 0}) == 514


def test_relative_position_embeddings_are_refused_by_name():
    with pytest.raises(UnsupportedConfigError, match="position_embedding_type 'relative_key'"):
        classifier.check_config({"model_type": "bert", "max_position_embeddings": 64,
                                 "position_embedding_type": "relative_key", **SMALL})  # fmt: skip
