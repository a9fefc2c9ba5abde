"""GTE beside its module: the checkpoints it arrives as (parity with transformers 5: tests/encoder_parity_test.py)."""

import numpy as np
import pytest

from models.encoders import classifier
from models.encoders.layers import UnsupportedConfigError

GTE = {
    "model_type": "gte", "vocab_size": 50, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2,
    "num_attention_heads": 2, "max_position_embeddings": 64, "type_vocab_size": 1,
}  # fmt: skip
IDS = {"input_ids": np.array([[0, 7, 9, 11, 2, 1]]), "attention_mask": np.array([[1, 1, 1, 1, 1, 0]])}


def _state():
    rng = np.random.default_rng(0)
    model = classifier.build(GTE, ["a", "b"])
    for param in model.torch_params():
        param.variable.assign(rng.normal(size=param.variable.shape).astype(np.float32) * 0.3)
    return model, classifier.torch_state(model)


@pytest.mark.parametrize("prefix", ["new.", ""], ids=["remote-code", "bare"])
def test_the_hubs_original_checkpoints_load_as_the_task_model(prefix):
    """gte-multilingual's rerankers and classifiers name tensors `new.` (remote code's NewForSequenceClassification),
    the bare encoders none: both read into our `gte.` names, head and all where the checkpoint has it."""
    source, state = _state()
    renamed = {(prefix + name.removeprefix("gte.")) if name.startswith("gte.") else name: value
               for name, value in state.items()}  # fmt: skip
    if not prefix:  # a bare GteModel holds no pooler or classifier
        renamed = {name: value for name, value in renamed.items() if not name.startswith(("pooler", "classifier"))}
    target = classifier.build(GTE, ["a", "b"])
    result = classifier.load(target, renamed)
    assert result.unused == ()
    if prefix:
        assert result.new == ()
        np.testing.assert_allclose(target(IDS).numpy(), source(IDS).numpy(), rtol=0, atol=1e-6)
    else:
        assert set(result.new) == source.head_names()


def test_rope_scaling_is_refused_by_name():
    with pytest.raises(UnsupportedConfigError, match="rope_type 'yarn'"):
        classifier.check_config({**GTE, "rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0}})


def test_check_says_what_it_computes():
    assert classifier.describe(GTE) == (
        "2 layers, hidden 16, 64 positions, rotary positions (theta 160,000), gated feed-forward, post-norm, "
        "tanh pooler"
    )
