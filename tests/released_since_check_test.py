"""What `hftfx run --check` says of the encoders released since transformers 5, as a user brings them:
gte-multilingual (XLM-R's SentencePiece saved by transformers 5, tokenizer.json without the .model), EuroBERT
(byte-level BPE behind Llama-3's split) and mmBERT (ModernBERT with Gemma's byte-fallback BPE), each a bare encoder
written by transformers 5 + PyTorch beside its tokenizer (tests/model_families.py: RELEASED_SINCE). Their runs end to
end: tests/model_families_e2e_test.py; their tokenizers id for id: models/tokenizers/families_test.py; their encoders
logit for logit: tests/encoder_parity_test.py."""

from __future__ import annotations

import io

import pytest

from pipeline.config import pipeline_config
from pipeline.orchestration.local_runner import check_run
from tests.tiny_model import tiny_overrides

LIMITS = {"dataset.limits": {"train": 256, "eval": 64, "test": 96}}
# what --check says of each: its path, what the encoder computes, its tokenizer
CHECK_LINES = {
    "gte": ("gte: our Keras encoder", "rotary positions (theta 160,000), gated feed-forward", "SentencePiece tok"),
    "eurobert": ("eurobert: our Keras encoder", "4 query heads over 2 key/value heads", "byte-level BPE tokenizer"),
    "mmbert": ("modernbert: our Keras encoder", "local attention over 8 tokens", "BPE with byte fallback tokenizer"),
}


@pytest.mark.parametrize("name", list(CHECK_LINES))
def test_check_names_the_family_positions_attention_tokenizer_and_recipe(released_model_dir, tmp_path, name):
    directory = released_model_dir(name)
    out = io.StringIO()
    check_run(pipeline_config.load_config(overrides={**tiny_overrides(tmp_path, directory, 32), **LIMITS}), stream=out)
    out = out.getvalue()
    for line in CHECK_LINES[name]:
        assert line in out, (line, out)
    assert "512 positions" in out and "recipe: " in out and "memory: a training step" in out
