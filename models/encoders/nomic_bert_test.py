"""NomicBERT beside its module: what --check says of it and the layout it reads (parity with transformers 5, whole
and in pieces: tests/encoder_parity_test.py)."""

import pytest

from models.encoders import classifier
from models.encoders.layers import UnsupportedConfigError

NOMIC = {
    "model_type": "nomic_bert", "vocab_size": 50, "hidden_size": 16, "intermediate_size": 24,
    "num_hidden_layers": 2, "num_attention_heads": 2,
}  # fmt: skip


def test_check_says_what_it_computes():
    assert classifier.describe(NOMIC) == (
        "2 layers, hidden 16, 2,048 positions, rotary positions (theta 1,000), gated feed-forward, post-norm, "
        "no biases, tanh pooler"
    )


def test_a_head_width_that_does_not_split_the_hidden_size_is_refused():
    with pytest.raises(UnsupportedConfigError, match="head_dim 4 x 2 heads, not hidden size 16"):
        classifier.check_config({**NOMIC, "head_dim": 4})


def test_the_checkpoint_names_are_the_hubs_layout_without_biases():
    names = [param.name for param in classifier.build(NOMIC, ["a", "b"]).torch_params()]
    block = [name for name in names if ".encoder.layers.0." in name]
    assert block == [
        f"nomic_bert.encoder.layers.0.{part}"
        for part in ("attn.Wqkv.weight", "attn.out_proj.weight", "norm1.weight", "norm1.bias", "mlp.fc11.weight",
                     "mlp.fc12.weight", "mlp.fc2.weight", "norm2.weight", "norm2.bias")
    ]  # fmt: skip
    assert "nomic_bert.pooler.dense.weight" in names
