"""ModernBERT end to end, as a user brings one: a folder laid out as the hub lays out answerdotai/ModernBERT-base
(a masked-LM checkpoint, a byte-level BPE tokenizer.json with NFC and [CLS] $A [SEP]), written by transformers 5
itself (tests/torch_reference.py). Its tokenizer id for id in-graph, `--check`'s account of it, then a LocalDagRunner
run that trains it with our own encoder, blesses, pushes and publishes it, and the published folder answering in
transformers 5 + PyTorch as the SavedModel does."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from models.tokenizers.tokenizer import InGraphTokenizer, tokenizer_spec
from pipeline.config import pipeline_config
from pipeline.orchestration.local_runner import run_local
from tests import torch_reference_env as reference
from tests.hf_export_check import BUCKET_TEXTS, hf_probabilities, serving_probabilities
from tests.model_families import EDGE_CASES, MULTILINGUAL, training_texts
from tests.serve_request import FP32, serve_check
from tests.tiny_model import tiny_overrides

pytestmark = pytest.mark.e2e
LIMITS = {"dataset.limits": {"train": 256, "eval": 64, "test": 96}}


@pytest.fixture(scope="module")
def modernbert_dir(tmp_path_factory):
    return reference.write_modernbert_folder(tmp_path_factory.mktemp("modernbert") / "model", training_texts())


def _in_graph_ids(directory: Path, texts, pairs, width: int) -> list[list[int]]:
    out = InGraphTokenizer(tokenizer_spec(directory), width)(
        tf.constant(texts), None if pairs is None else tf.constant(pairs)
    )
    return [
        row[mask > 0].tolist()
        for row, mask in zip(out["input_ids"].numpy(), out["attention_mask"].numpy(), strict=True)
    ]


def test_the_tokenizer_gives_transformers_5s_ids(modernbert_dir, review_texts):
    """NFC, the byte-level split and merges, [CLS] $A [SEP] (and $B [SEP] for pairs), longest_first truncation."""
    texts = review_texts[:1500] + EDGE_CASES + MULTILINGUAL
    assert tokenizer_spec(modernbert_dir).pieces.nfc
    theirs = reference.on_texts(modernbert_dir, texts, max_length=64)["ids"]
    assert _in_graph_ids(modernbert_dir, texts, None, 64) == theirs
    firsts, seconds = texts[:400:2], texts[1:400:2]
    theirs = reference.on_texts(modernbert_dir, firsts, seconds, max_length=24)["ids"]
    assert _in_graph_ids(modernbert_dir, firsts, seconds, 24) == theirs


def test_check_names_the_path_positions_window_tokenizer_and_recipe(modernbert_dir, tmp_path):
    """What `hftfx run --check` prints (pipeline/cli/commands.py calls check_run), in this process."""
    import io

    from pipeline.orchestration.local_runner import check_run

    overrides = {**tiny_overrides(tmp_path, modernbert_dir, 32), **LIMITS}
    out = io.StringIO()
    check_run(pipeline_config.load_config(overrides=overrides), stream=out)
    out = out.getvalue()
    assert "modernbert: our Keras encoder, loaded from model.safetensors (ModernBertForSequenceClassification" in out
    assert "512 positions, local attention over 8 tokens in 2 of 4 layers" in out
    assert "cls pooling" in out and "byte-level BPE tokenizer, in-graph" in out
    assert "recipe: " in out
    assert "memory: a training step of 16 texts at width 32 holds ~" in out


def test_a_setting_our_encoder_does_not_compute_is_refused_before_any_component(modernbert_dir, tmp_path):
    import json
    import shutil

    from models.encoders.from_folder import UnsupportedModelError
    from pipeline.orchestration.preflight import check_model

    copy = shutil.copytree(modernbert_dir, tmp_path / "model")
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}))
    with pytest.raises(UnsupportedModelError, match=r"modernbert model .* has rope_type 'yarn' \(only the default"):
        check_model(pipeline_config.load_config(overrides={"model.name": str(copy)}))


@pytest.fixture(scope="module")
def modernbert_run(modernbert_dir, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("modernbert-run")
    return run_local(pipeline_config.load_config(overrides={**tiny_overrides(workdir, modernbert_dir, 32), **LIMITS}))


def test_trains_blesses_pushes_and_publishes(modernbert_run):
    assert modernbert_run.blessed is True and modernbert_run.pushed_dir and modernbert_run.hf_model_dir
    names = {p.name for p in Path(modernbert_run.hf_model_dir).iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md"} <= names and "tf_model.h5" not in names


def test_the_export_serves_as_tf_serving_would(modernbert_run):
    """A fresh process with only tensorflow + tensorflow_text: signatures, warm-up, a raw-text request. Byte-level BPE
    is TensorFlow core; ModernBERT's NFC is tensorflow_text's NormalizeUTF8, one of the ops TF Serving links."""
    done = serve_check(modernbert_run.pushed_dir, {"instances": ["a warm, funny and moving film", "Ein Film 😀"]})
    ops = next(line for line in done.stdout.splitlines() if line.startswith("ops:"))
    assert "tensorflow_text ops ['NormalizeUTF8']" in ops
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("response:")]
    predictions = json.loads(line.removeprefix("response:").strip())["predictions"]
    assert [p["label"] in ("rotten", "fresh") for p in predictions] == [True, True]


def test_the_published_folder_answers_in_transformers_5_as_the_savedmodel_does(modernbert_run):
    hf, labels = hf_probabilities(modernbert_run.hf_model_dir, BUCKET_TEXTS)
    served = serving_probabilities(modernbert_run.pushed_dir, BUCKET_TEXTS)
    assert labels == {"0": "rotten", "1": "fresh"}
    np.testing.assert_allclose(hf, served, rtol=0, atol=1e-4)


def _peak_rss_gib(pid: int) -> float:
    """The process' peak resident memory so far (VmHWM), in GiB."""
    (line,) = [x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("VmHWM:")]
    return int(line.split()[1]) / 2**20


@pytest.mark.parametrize("char", [" ", "\n", "\u00a0", "\u3000"], ids=["spaces", "newlines", "NBSP", "U+3000"])
def test_megabytes_of_whitespace_cannot_take_the_server_down(modernbert_run, char):
    """`hftfx serve` on the byte-level BPE model: three concurrent requests of one text of whitespace, 1.4 MB as the
    JSON body carries it (under its 1.5 MB limit), each answered within 2 s and the server under 3 GiB. Before
    whitespace counted against the character budget each such text was 1.4 M tokens: 27-40 s and 15 GiB for three."""
    import concurrent.futures
    import sys
    import time

    from tests import vertex_container

    text = char * (1_400_000 // (len(json.dumps(char, ensure_ascii=False).encode()) - 2))
    body = json.dumps({"instances": [text]}, ensure_ascii=False).encode()
    command = [sys.executable, "-m", "pipeline.cli", "serve", *FP32]
    with vertex_container.serving(command, str(modernbert_run.pushed_dir)) as container:

        def one(_):
            import urllib.error
            import urllib.request

            started = time.monotonic()
            request = urllib.request.Request(container.predict, data=body, headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=120) as response:
                    status = response.status
            except urllib.error.HTTPError as error:
                status = error.code
            return status, time.monotonic() - started

        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            answers = list(pool.map(one, range(3)))
        peak = _peak_rss_gib(container.pid)
    assert all(status == 200 for status, _ in answers), answers
    assert all(seconds < 2 for _, seconds in answers), answers
    assert peak < 3, peak
