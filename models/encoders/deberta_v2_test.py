"""DeBERTa beside its module: what --check says of its relative positions and what it refuses (parity with
transformers 5, whole and in pieces: tests/encoder_parity_test.py; its attention through the shared core, recomputed
and in pieces: layers_test.py)."""

import pytest

from models.encoders import classifier
from models.encoders.layers import UnsupportedConfigError

V3 = {
    "model_type": "deberta-v2", "vocab_size": 50, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2,
    "num_attention_heads": 2, "max_position_embeddings": 64, "relative_attention": True,
    "position_biased_input": False, "pos_att_type": ["p2c", "c2p"], "position_buckets": 8, "share_att_key": True,
    "norm_rel_ebd": "layer_norm", "type_vocab_size": 0,
}  # fmt: skip


def test_check_says_it_attends_over_log_bucketed_relative_positions():
    assert classifier.describe(V3).endswith(", disentangled attention (p2c+c2p) over relative positions, log-bucketed "
                                            "into 8 each side")  # fmt: skip


@pytest.mark.parametrize(
    ("change", "message"),
    [({"conv_kernel_size": 3}, "conv_kernel_size"), ({"pos_att_type": ["p2p"]}, "pos_att_type \\['p2p'\\]")],
)
def test_what_it_does_not_compute_is_refused_by_name(change, message):
    with pytest.raises(UnsupportedConfigError, match=message):
        classifier.check_config({**V3, **change})
