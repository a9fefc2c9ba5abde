"""Jina v3 beside its module: what --check says of it and the remote-code adapters it refuses (parity with
transformers 5, whole and in pieces: tests/encoder_parity_test.py)."""

import pytest

from models.encoders import classifier
from models.encoders.layers import UnsupportedConfigError

JINA = {
    "model_type": "jina_embeddings_v3", "vocab_size": 50, "hidden_size": 16, "intermediate_size": 24,
    "num_hidden_layers": 2, "num_attention_heads": 2,
}  # fmt: skip


def test_check_says_what_it_computes():
    assert classifier.describe(JINA) == (
        "2 layers, hidden 16, 8,194 positions, rotary positions (theta 20,000), post-norm, XLM-R's classification head"
    )


def test_task_adapters_of_the_remote_code_release_are_refused_naming_the_choice():
    remote = {**JINA, "lora_adaptations": ["retrieval.query", "classification"], "lora_rank": 4}
    with pytest.raises(UnsupportedConfigError, match=r"task LoRA adapters \(lora_adaptations, lora_rank.*merge"):
        classifier.check_config(remote)


def test_the_checkpoint_names_are_the_hubs_layout():
    names = [param.name for param in classifier.build(JINA, ["a", "b"]).torch_params()]
    assert "roberta.emb_ln.weight" in names and "roberta.encoder.layers.1.mixer.Wqkv.bias" in names
    assert names[-2:] == ["classifier.out_proj.weight", "classifier.out_proj.bias"]
