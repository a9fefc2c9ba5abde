"""What `hftfx run --check` says of the encoders released since transformers 5, as a user brings them:
gte-multilingual (XLM-R's SentencePiece saved by transformers 5, tokenizer.json without the .model), EuroBERT
(byte-level BPE behind Llama-3's split), mmBERT (ModernBERT with Gemma's byte-fallback BPE), UltraBERT (windows in
two of three layers, a byte-level BPE that splits digits), NomicBERT and Jina v3 (XLM-R with rotary positions), each
a bare encoder written by transformers 5 + PyTorch beside its tokenizer (tests/model_families.py: RELEASED_SINCE).
Their runs end to end: tests/model_families_e2e_test.py; their tokenizers id for id:
models/tokenizers/families_test.py; their encoders logit for logit: tests/encoder_parity_test.py."""

from __future__ import annotations

import io

import pytest

from pipeline.config import pipeline_config
from pipeline.orchestration.local_runner import check_run
from tests.tiny_model import tiny_overrides

LIMITS = {"dataset.limits": {"train": 256, "eval": 64, "test": 96}}
# what --check says of each: its path, what the encoder computes, its tokenizer, its positions
CHECK_LINES = {
    "gte": ("gte: our Keras encoder", "rotary positions (theta 160,000), gated feed-forward", "SentencePiece tok",
            "512 positions"),
    "eurobert": ("eurobert: our Keras encoder", "4 query heads over 2 key/value heads", "byte-level BPE tokenizer",
                 "512 positions"),
    "mmbert": ("modernbert: our Keras encoder", "local attention over 8 tokens", "BPE with byte fallback tokenizer",
               "512 positions"),
    "ultrabert": ("ultrabert: our Keras encoder", "2 of 3 layers attend within +-8 tokens",
                  "rotary positions (theta full 2,560,000, sliding 10,000)", "byte-level BPE tokenizer",
                  "512 positions"),
    "nomic-bert": ("nomic_bert: our Keras encoder", "rotary positions (theta 500), gated feed-forward, post-norm",
                   "WordPiece tokenizer", "512 positions"),
    "jina-v3": ("jina_embeddings_v3: our Keras encoder", "rotary positions (theta 20,000)",
                "XLM-R's classification head", "SentencePiece tokenizer", "514 positions"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(CHECK_LINES))
def test_check_names_the_family_positions_attention_tokenizer_and_recipe(released_model_dir, tmp_path, name):
    directory = released_model_dir(name)
    out = io.StringIO()
    check_run(pipeline_config.load_config(overrides={**tiny_overrides(tmp_path, directory, 32), **LIMITS}), stream=out)
    out = out.getvalue()
    for line in CHECK_LINES[name]:
        assert line in out, (line, out)
    assert "recipe: " in out and "memory: a training step" in out
