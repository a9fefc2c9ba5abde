"""Our encoders against transformers 5 + PyTorch CPU, family by family: tiny random checkpoints written by
transformers 5 itself, loaded into our Keras classifiers from model.safetensors, logits compared on padded batches,
pairs and texts longer than ModernBERT's local window, to the float32 bound of tests/float_bounds.py."""

from __future__ import annotations

import json

import numpy as np
import pytest

from models.encoders import classifier, long_attention
from tests import torch_reference_env as reference
from tests.float_bounds import FLOAT32_UNIT_ROUNDOFF

FAMILIES = [
    "bert", "roberta", "xlm-roberta", "camembert", "electra", "distilbert", "albert", "mpnet",
    "deberta-v3", "deberta-v2", "modernbert", "modernbert-cls", "gte", "eurobert", "eurobert-bos", "eurobert-mean",
    "nomic-bert", "jina-v3", "ultrabert", "ultrabert-mean",
]  # fmt: skip
WIDTH = 40  # five times the tiny ModernBERT's window of 8: local and global layers see different keys


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    return reference.write_checkpoints(tmp_path_factory.mktemp("reference-checkpoints"), FAMILIES)


@pytest.fixture(scope="module")
def expected_logits(checkpoints):
    """(family, pairs) -> the reference's logits, all computed in one reference process."""
    cases = [(family, pairs) for family in FAMILIES for pairs in (False, True)]
    jobs = []
    for family, pairs in cases:
        batch = batch_for(json.loads((checkpoints[family] / "config.json").read_text()), pairs)
        jobs.append((checkpoints[family], {k: v.tolist() for k, v in batch.items()}))
    return dict(zip(cases, map(np.array, reference.logits(jobs)), strict=True))


def batch_for(config: dict, pairs: bool) -> dict:
    """Three rows, two of them padded (to 25 and 10 tokens), ids as a tokenizer lays them out: the first token
    the family's CLS id, pads the pad id; with `pairs`, a second segment of token type 1 where the family has types."""
    rng = np.random.default_rng(7)
    mask = np.ones((3, WIDTH), np.int64)
    mask[1, 25:] = 0
    mask[2, 10:] = 0
    pad = config.get("pad_token_id") or 0
    ids = np.where(mask > 0, rng.integers(5, config["vocab_size"], (3, WIDTH)), pad)
    ids[:, 0] = 2
    batch = {"input_ids": ids, "attention_mask": mask}
    if pairs and config.get("type_vocab_size", 0) > 1:
        types = np.zeros_like(ids)
        types[:, WIDTH // 2 :] = 1
        batch["token_type_ids"] = types * mask
    return batch


@pytest.mark.parametrize("pieces", [False, True], ids=["whole", "in-pieces"])
@pytest.mark.parametrize("pairs", [False, True], ids=["single", "pairs"])
@pytest.mark.parametrize("family", FAMILIES)
def test_logits_match_transformers_5(checkpoints, expected_logits, family, pairs, pieces, monkeypatch):
    """`pieces`: attention in pieces of 16 queries (what widths past QUERY_CHUNK run: models/encoders/
    long_attention.py), ModernBERT's local layers reading their band only."""
    if pieces:
        monkeypatch.setattr(long_attention, "QUERY_CHUNK", 16)
    directory = checkpoints[family]
    config = json.loads((directory / "config.json").read_text())
    batch = batch_for(config, pairs)
    expected = expected_logits[family, pairs]

    model = classifier.build(config, ["neg", "pos"])
    loaded = classifier.load(model, classifier.read_safetensors(directory / "model.safetensors"))
    ours = model(batch, training=False).numpy()

    assert loaded.new == (), "a ...ForSequenceClassification checkpoint brings its head"
    assert np.abs(expected).max() > 0.1, "logits this small would hide a difference"
    # Chain of sums to a logit ~ layers x (4 hidden + intermediate + width) per layer: well under 4,000 terms here.
    np.testing.assert_allclose(ours, expected, rtol=0, atol=4000 * FLOAT32_UNIT_ROUNDOFF * np.abs(expected).max())
    # Padding is masked: a padded row answers as the same text alone at its own width.
    alone = {k: v[2:3, :10] for k, v in batch.items()}
    np.testing.assert_allclose(model(alone, training=False).numpy()[0], ours[2], rtol=0, atol=1e-5)


def test_export_in_pytorch_names_is_what_was_loaded(checkpoints):
    """What we write back for transformers 5 is the checkpoint itself, name for name and value for value."""
    directory = checkpoints["modernbert"]
    state = classifier.read_safetensors(directory / "model.safetensors")
    model = classifier.build(json.loads((directory / "config.json").read_text()), ["neg", "pos"])
    classifier.load(model, state)
    exported = classifier.torch_state(model)
    assert set(exported) == set(state)
    for name, value in exported.items():
        np.testing.assert_array_equal(value, state[name], err_msg=name)
