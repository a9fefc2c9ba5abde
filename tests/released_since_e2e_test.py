"""The encoders released since transformers 5, as a user brings them: gte-multilingual (XLM-R's SentencePiece saved
by transformers 5, tokenizer.json without the .model), EuroBERT (byte-level BPE behind Llama-3's split) and mmBERT
(ModernBERT with Gemma's byte-fallback BPE), each a bare encoder written by transformers 5 + PyTorch beside its
tokenizer (tests/model_families.py: RELEASED_SINCE). `--check`'s account, then a LocalDagRunner run that trains,
blesses, pushes and publishes, TF Serving's view of the export, and the published folder answering in transformers 5
+ PyTorch as the SavedModel does. Their tokenizers id for id: models/tokenizers/families_test.py; their encoders
logit for logit: tests/encoder_parity_test.py."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from pipeline.config import pipeline_config
from pipeline.orchestration.local_runner import check_run, run_local
from tests.hf_export_check import BUCKET_TEXTS, hf_probabilities, serving_probabilities
from tests.model_families import write_released_since
from tests.serve_request import serve_check
from tests.tiny_model import tiny_overrides

pytestmark = pytest.mark.e2e
LIMITS = {"dataset.limits": {"train": 256, "eval": 64, "test": 96}}
# what --check says of each: its path, what the encoder computes, its tokenizer
CHECK_LINES = {
    "gte": ("gte: our Keras encoder", "rotary positions (theta 160,000), gated feed-forward", "SentencePiece tok"),
    "eurobert": ("eurobert: our Keras encoder", "4 query heads over 2 key/value heads", "byte-level BPE tokenizer"),
    "mmbert": ("modernbert: our Keras encoder", "local attention over 8 tokens", "BPE with byte fallback tokenizer"),
}


@pytest.fixture(scope="module", params=list(CHECK_LINES))  # all in `make test`: about 40 s a family
def released(request, tmp_path_factory):
    return request.param, write_released_since(request.param, tmp_path_factory.mktemp(request.param) / "model")


def test_check_names_the_family_positions_attention_tokenizer_and_recipe(released, tmp_path):
    name, directory = released
    out = io.StringIO()
    check_run(pipeline_config.load_config(overrides={**tiny_overrides(tmp_path, directory, 32), **LIMITS}), stream=out)
    out = out.getvalue()
    for line in CHECK_LINES[name]:
        assert line in out, (line, out)
    assert "512 positions" in out and "recipe: " in out and "memory: a training step" in out


@pytest.fixture(scope="module")
def released_run(released, tmp_path_factory):
    name, directory = released
    workdir = tmp_path_factory.mktemp(f"{name}-run")
    return name, run_local(pipeline_config.load_config(overrides={**tiny_overrides(workdir, directory, 32), **LIMITS}))


def test_trains_blesses_pushes_and_publishes(released_run):
    _, summary = released_run
    assert summary.blessed is True and summary.pushed_dir and summary.hf_model_dir
    published = {p.name for p in Path(summary.hf_model_dir).iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md"} <= published


def test_the_export_serves_as_tf_serving_would(released_run):
    _, summary = released_run
    done = serve_check(summary.pushed_dir, {"instances": ["a warm, funny and moving film", "Ein großartiger Film 😀"]})
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("response:")]
    predictions = json.loads(line.removeprefix("response:").strip())["predictions"]
    assert len(predictions) == 2 and all(p["label"] in summary.label_names for p in predictions)


def test_the_published_folder_answers_in_transformers_5_as_the_savedmodel_does(released_run):
    _, summary = released_run
    hf, labels = hf_probabilities(summary.hf_model_dir, BUCKET_TEXTS)
    assert labels == {"0": "rotten", "1": "fresh"}
    np.testing.assert_allclose(hf, serving_probabilities(summary.pushed_dir, BUCKET_TEXTS), rtol=0, atol=1e-4)
