"""ModernBERT beside its module: its local and global layers as --check states them, and what it refuses (parity
with transformers 5 past its window, whole and in pieces: tests/encoder_parity_test.py)."""

import pytest

from models.encoders import classifier
from models.encoders.layers import UnsupportedConfigError

MODERNBERT = {
    "model_type": "modernbert", "vocab_size": 50, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 6,
    "num_attention_heads": 2, "local_attention": 8, "global_attn_every_n_layers": 3, "max_position_embeddings": 512,
}  # fmt: skip


def test_check_says_which_layers_attend_locally_and_their_thetas():
    assert classifier.describe(MODERNBERT) == (
        "6 layers, hidden 16, 512 positions, local attention over 8 tokens in 4 of 6 layers (global in the rest), "
        "rotary thetas 160,000 / 10,000, cls pooling"
    )


def test_a_pooling_it_does_not_compute_is_refused_by_name():
    with pytest.raises(UnsupportedConfigError, match="classifier_pooling 'max'"):
        classifier.check_config({**MODERNBERT, "classifier_pooling": "max"})
