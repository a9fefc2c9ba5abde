"""Models of each tokenizer family end to end under LocalDagRunner: preflight, Transform with their in-graph
tokenizer, training, blessing (thresholds at 0), push, publishing, TF Serving's view of the export in a fresh process
(ops TF Serving links, signatures, warm-up, a raw-text request) and the published folder answering in transformers 5 +
PyTorch as the SavedModel does. `make test` runs one family of each tokenizer kind end to end: SentencePiece here
(XLM-R; gte-multilingual's, saved by transformers 5), BPE with byte fallback (mmBERT) and the GPT-4 / Llama-3 split
(UltraBERT's, digits one by one, on EuroBERT's blocks) here, GPT-2's byte-level BPE in tests/modernbert_e2e_test.py,
WordPiece in tests/pipeline_e2e_test.py; the rest in `make test-all`. The encoders released since transformers 5
(GTE, EuroBERT, mmBERT, UltraBERT, NomicBERT, Jina v3) arrive as bare encoders written by transformers 5 + PyTorch
beside their tokenizer; what --check says of them: tests/released_since_check_test.py. Every family's tokenizer is
checked id for id in models/tokenizers/families_test.py and every ported encoder logit for logit in
tests/encoder_parity_test.py."""

import json
from pathlib import Path

import numpy as np
import pytest

from pipeline.config import pipeline_config
from pipeline.orchestration.local_runner import run_local
from tests.hf_export_check import BUCKET_TEXTS, hf_probabilities, serving_probabilities
from tests.model_families import RELEASED_SINCE, SENTENCEPIECE_FAMILIES
from tests.serve_request import serve_check
from tests.tiny_model import tiny_overrides

pytestmark = pytest.mark.e2e


SLOW = pytest.mark.slow
# the released families whose run's every part another run in `make test` trains: in `make test-all`
BORROWED = ("jina-v3", "nomic-bert", "eurobert")
# what serve-check's op line shows of each family's graph: byte-level BPE is TensorFlow core alone
EXPECTED_TEXT_OPS = {
    "roberta": "tensorflow_text ops []",
    "xlm-roberta": "'SentencepieceTokenizeOp'",
    "albert": "'SentencepieceTokenizeOp'",
    "deberta-v2": "'SentencepieceTokenizeOp'",
    "mpnet": "'WordpieceTokenizeWithOffsets'",
    # the encoders released since transformers 5 (tests/model_families.py: RELEASED_SINCE)
    "gte": "'SentencepieceTokenizeOp'",
    "eurobert": "tensorflow_text ops []",
    "mmbert": "tensorflow_text ops []",
    "jina-v3": "'SentencepieceTokenizeOp'",
    "nomic-bert": "'WordpieceTokenizeWithOffsets'",
    "ultrabert": "tensorflow_text ops []",
}


@pytest.fixture(
    scope="module",
    params=[
        # SentencePiece in `make test`: a break of its export (the .model transformers 5 does not save) surfaced only
        # at the publisher, after training. The other families in `make test-all` (CI's time).
        pytest.param("roberta", marks=SLOW),
        "xlm-roberta",
        pytest.param("albert", marks=SLOW),
        pytest.param("deberta-v2", marks=SLOW),
        pytest.param("mpnet", marks=SLOW),
        # in `make test`: tokenizer kinds (byte fallback, Llama-3's split, tokenizer.json without the .model) and
        # encoders no other run has, about 40 s each. In `make test-all` (CI's time): Jina v3 (GTE's embeddings, whose
        # run is here, and XLM-R's SentencePiece, whose run is here too), NomicBERT (Jina v3's blocks, and the
        # WordPiece tokenizer MiniLM's runs have) and EuroBERT (UltraBERT's run trains its blocks behind GPT-4's split)
        *(pytest.param(name, marks=SLOW) if name in BORROWED else name for name in RELEASED_SINCE),
    ],
)
def family_run(request, tmp_path_factory, family_model_dir, released_model_dir):
    built = released_model_dir if request.param in RELEASED_SINCE else family_model_dir
    model_dir = built(request.param)
    workdir = tmp_path_factory.mktemp(f"{request.param}-run")
    overrides = {**tiny_overrides(workdir, model_dir, 32), "dataset.limits": {"train": 256, "eval": 64, "test": 96}}
    return request.param, run_local(pipeline_config.load_config(overrides=overrides))


def test_trains_blesses_pushes_and_publishes(family_run):
    name, summary = family_run
    assert summary.blessed is True and summary.pushed_dir and summary.hf_model_dir
    assert 0 <= summary.metrics["accuracy"] <= 1
    published = {p.name for p in Path(summary.hf_model_dir).iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md"} <= published
    if name in SENTENCEPIECE_FAMILIES:  # what the in-graph tokenizer of a warm start or a later run reads
        assert SENTENCEPIECE_FAMILIES[name][0] in published


def test_the_export_serves_as_tf_serving_would(family_run):
    name, summary = family_run
    request = {"instances": ["a warm, funny and moving film", "Ein großartiger Film 😀"]}
    done = serve_check(summary.pushed_dir, request)
    ops_line = next(line for line in done.stdout.splitlines() if line.startswith("ops:"))
    assert EXPECTED_TEXT_OPS[name] in ops_line
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("response:")]
    predictions = json.loads(line.removeprefix("response:").strip())["predictions"]
    assert len(predictions) == 2 and all(p["label"] in summary.label_names for p in predictions)


def test_the_published_folder_answers_in_transformers_5_as_the_savedmodel_does(family_run):
    _, summary = family_run
    hf, labels = hf_probabilities(summary.hf_model_dir, BUCKET_TEXTS)
    assert labels == {"0": "rotten", "1": "fresh"}
    np.testing.assert_allclose(hf, serving_probabilities(summary.pushed_dir, BUCKET_TEXTS), rtol=0, atol=1e-4)
