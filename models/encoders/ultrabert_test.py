"""UltraBERT beside its module: its layer types, windows and RoPE bases as config.json states them, old and new (parity
with transformers 5 past the window, whole and in pieces: tests/encoder_parity_test.py)."""

import pytest

from models.encoders import classifier
from models.encoders.layers import UnsupportedConfigError
from models.encoders.ultrabert import FULL, SLIDING, Sizes

ULTRABERT = {
    "model_type": "ultrabert", "vocab_size": 50, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 6,
    "num_attention_heads": 2,
}  # fmt: skip


def test_defaults_are_two_sliding_layers_then_a_full_one_each_with_its_rope_base():
    sizes = Sizes.of(ULTRABERT)
    assert sizes.layer_types == (SLIDING, SLIDING, FULL) * 2 and sizes.half_window == 128
    assert sizes.thetas == {SLIDING: 10_000.0, FULL: 2_560_000.0} and sizes.positions == 32_768
    assert classifier.describe(ULTRABERT) == (
        "6 layers, hidden 16, 32,768 positions, 4 of 6 layers attend within +-128 tokens, rotary positions (theta "
        "full 2,560,000, sliding 10,000), RMSNorm, SwiGLU, multi-head attention, bos pooling"
    )


def test_older_checkpoints_attention_windows_and_rope_theta_lists_are_read():
    old = {**ULTRABERT, "num_hidden_layers": 3, "attention_windows": [64, 64, 0], "rope_theta": [500.0, 500.0, 9e5]}
    sizes = Sizes.of(old)
    assert sizes.layer_types == (SLIDING, SLIDING, FULL) and sizes.half_window == 64
    assert sizes.thetas == {SLIDING: 500.0, FULL: 9e5}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"classifier_pooling": "late"}, "classifier_pooling 'late' \\(UltraBERT pools cls, mean\\)"),
        ({"layer_types": ["full_attention"] * 5}, "layer_types"),
        ({"rope_parameters": {FULL: {"rope_type": "yarn", "factor": 4.0}}}, "rope_type 'yarn'"),
    ],
)
def test_what_it_does_not_compute_is_refused_by_name(change, message):
    with pytest.raises(UnsupportedConfigError, match=message):
        classifier.check_config({**ULTRABERT, **change})
