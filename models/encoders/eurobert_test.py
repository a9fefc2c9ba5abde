"""EuroBERT beside its module: its settings, read or refused (parity with transformers 5 for bos, mean and late
pooling and grouped-query attention: tests/encoder_parity_test.py)."""

import numpy as np
import pytest

from models.encoders import classifier
from models.encoders.layers import UnsupportedConfigError

EUROBERT = {
    "model_type": "eurobert", "vocab_size": 50, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"classifier_pooling": "cls"}, r"classifier_pooling 'cls' \(EuroBERT pools bos, mean, late\)"),
        ({"num_key_value_heads": 3}, "4 attention heads, which 3 key/value heads do not divide"),
        ({"rope_parameters": {"rope_type": "llama3", "rope_theta": 1e4, "factor": 8.0}}, "rope_type 'llama3'"),
    ],
)
def test_settings_it_does_not_compute_are_refused_by_name(change, message):
    with pytest.raises(UnsupportedConfigError, match=message):
        classifier.check_config({**EUROBERT, **change})


def test_late_pooling_averages_the_logits_of_real_tokens_only():
    """A padded row answers as the same text alone: the late head's mean leaves padding out."""
    model = classifier.build(EUROBERT, ["a", "b"])
    ids = np.array([[2, 7, 9, 11, 3, 1, 1]])
    padded = model({"input_ids": ids, "attention_mask": (ids != 1).astype(int)}).numpy()
    alone = model({"input_ids": ids[:, :5], "attention_mask": np.ones((1, 5), int)}).numpy()
    np.testing.assert_allclose(padded, alone, rtol=0, atol=1e-6)


def test_check_says_what_it_computes():
    assert classifier.describe(EUROBERT) == (
        "2 layers, hidden 16, 64 positions, rotary positions (theta 10,000), RMSNorm, SwiGLU, 4 query heads over 2 "
        "key/value heads attention, late pooling"
    )
