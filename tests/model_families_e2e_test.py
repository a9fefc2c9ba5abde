"""Models of each tokenizer family end to end under LocalDagRunner: preflight, Transform with their in-graph
tokenizer, training, blessing (thresholds at 0), push, and TF Serving's view of the export in a fresh process
(ops TF Serving links, signatures, warm-up, a raw-text request). All of them in `make test-all`; `make test` runs a
byte-level BPE family end to end through tests/modernbert_e2e_test.py, every family's tokenizer id for id
(models/tokenizers/families_test.py) and every ported encoder logit for logit (tests/encoder_parity_test.py)."""

import json

import pytest

from pipeline.config import pipeline_config
from pipeline.orchestration.local_runner import run_local
from tests.serve_request import serve_check
from tests.tiny_model import tiny_overrides

pytestmark = pytest.mark.e2e


SLOW = pytest.mark.slow
# what serve-check's op line shows of each family's graph: byte-level BPE is TensorFlow core alone
EXPECTED_TEXT_OPS = {
    "roberta": "tensorflow_text ops []",
    "xlm-roberta": "'SentencepieceTokenizeOp'",
    "albert": "'SentencepieceTokenizeOp'",
    "deberta-v2": "'SentencepieceTokenizeOp'",
    "mpnet": "'WordpieceTokenizeWithOffsets'",
    "funnel": "'WordpieceTokenizeWithOffsets'",
}


@pytest.fixture(
    scope="module",
    params=[
        # All in `make test-all` (CI's time: ModernBERT's run is the fast suite's, tests/modernbert_e2e_test.py; every
        # family's tokenizer is checked id for id in models/tokenizers/families_test.py either way).
        pytest.param("roberta", marks=SLOW),
        pytest.param("xlm-roberta", marks=SLOW),
        pytest.param("albert", marks=SLOW),
        pytest.param("deberta-v2", marks=SLOW),
        pytest.param("mpnet", marks=SLOW),
        pytest.param("funnel", marks=SLOW),
    ],
)
def family_run(request, tmp_path_factory, family_model_dir):
    model_dir = family_model_dir(request.param)
    workdir = tmp_path_factory.mktemp(f"{request.param}-run")
    overrides = {**tiny_overrides(workdir, model_dir, 32), "dataset.limits": {"train": 256, "eval": 64, "test": 96}}
    return request.param, run_local(pipeline_config.load_config(overrides=overrides))


def test_trains_blesses_and_pushes(family_run):
    _, summary = family_run
    assert summary.blessed is True and summary.pushed_dir
    assert 0 <= summary.metrics["accuracy"] <= 1


def test_the_export_serves_as_tf_serving_would(family_run):
    name, summary = family_run
    request = {"instances": ["a warm, funny and moving film", "Ein großartiger Film 😀"]}
    done = serve_check(summary.pushed_dir, request)
    ops_line = next(line for line in done.stdout.splitlines() if line.startswith("ops:"))
    assert EXPECTED_TEXT_OPS[name] in ops_line
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("response:")]
    predictions = json.loads(line.removeprefix("response:").strip())["predictions"]
    assert len(predictions) == 2 and all(p["label"] in summary.label_names for p in predictions)
