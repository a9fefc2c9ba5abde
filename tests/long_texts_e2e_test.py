"""model.long_texts: windows, run by LocalDagRunner on the tiny BERT: documents longer than the width are split
into overlapping windows in the Transform, trained one window per example, and answered per document by every
consumer of the export (TF Serving in a fresh process, the Evaluator, batch scoring) as the mean of the windows'
probabilities, which a transformers user computes the same way from the HF export."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pipeline.config import pipeline_config
from pipeline.orchestration.local_runner import run_local
from tests import user_datasets
from tests.float_bounds import probability_bound
from tests.hf_export_check import hf_window_probabilities
from tests.serve_request import ask
from tests.tiny_model import tiny_overrides

pytestmark = pytest.mark.e2e

WIDTH, STRIDE = 32, 0.5
WORDS = 70  # each page's last words: the end of a plot synopsis, then the review that carries the verdict


def _pages(documents: int) -> list[dict]:
    return [
        {"page": " ".join(row["page"].split()[-WORDS:]), "verdict": row["verdict"]}
        for row in user_datasets.long_document_rows(documents)
    ]


@pytest.fixture(scope="module")
def sensitive_bert_dir(tmp_path_factory):
    """The tiny BERT with weights wide enough that texts move its answers by about 0.05, as a fine-tuned model's
    do (at the default 0.02 a barely trained tiny BERT answers within 1e-4 of 0.5 whatever it reads): what makes
    the mean over windows measurably different from one window's answer."""
    from tests.tiny_model import write_tiny_bert

    return write_tiny_bert(tmp_path_factory.mktemp("sensitive-bert"), initializer_range=0.1)


@pytest.fixture(scope="module")
def windowed(tmp_path_factory, sensitive_bert_dir):
    workdir = tmp_path_factory.mktemp("windows")
    data = workdir / "pages.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in _pages(160)), encoding="utf-8")
    overrides = {
        **tiny_overrides(workdir, sensitive_bert_dir, WIDTH),
        "model.long_texts": "windows",
        "model.window_stride": STRIDE,
        "dataset": {"name": str(data), "text_column": "page", "label_column": "verdict"},
    }
    config = pipeline_config.load_config(overrides=overrides)
    return config, run_local(config)


def _window_count(summary) -> int:
    return int(re.search(r"windows: at most (\d+) per text \(auto: 99% of the texts whole\)", summary.lengths)[1])


def test_windows_are_chosen_from_the_texts_trained_per_window_and_evaluated_per_document(windowed, tmp_path):
    from pipeline.reporting.report import build_report

    config, summary = windowed
    assert summary.outcome == "complete" and summary.pushed_dir
    count = _window_count(summary)
    assert 2 < count <= 16  # 70 words in 30-token windows: several
    assert f"max_windows {count}" not in summary.lengths  # said once, by the windows choice
    # one example per window: an epoch is more steps than the train split's documents make
    steps, batch = summary.throughput["steps"], config.training.batch_size
    assert steps > 2 * (summary.split_counts["train"] // batch), summary.throughput
    # TFMA scored documents, not windows
    assert summary.metrics["example_count"] == summary.split_counts["test"]
    report = build_report(config.metadata_sqlite, config.pipeline_name, tmp_path / "report.html", summary)
    assert f"<li>windows: at most {count} per text" in report.read_text() and "<li>batch widths" in report.read_text()
    card = (Path(summary.hf_model_dir) / "README.md").read_text()
    assert "overlapping windows" in card and f"long texts windows (at most {count}, stride {STRIDE})" in card


def test_the_served_answer_per_document_is_the_mean_over_its_windows_and_batch_scoring_agrees(
    windowed, sensitive_bert_dir, tmp_path
):
    """One raw document in, one answer out, equal to what a transformers user gets from the HF export by averaging
    its tokenizer's overflowing windows; `hftfx predict` gives the same numbers."""
    _, summary = windowed
    count = _window_count(summary)
    pages = [row["page"] for row in _pages(20)] + ["a gem.", ""]
    served = ask(summary.pushed_dir, {"instances": pages})["predictions"]
    assert len(served) == len(pages)
    served = np.array([p["probabilities"] for p in served])
    budget = WIDTH - 2
    overlap = budget - int(budget * STRIDE)
    outside, first_windows = hf_window_probabilities(summary.hf_model_dir, pages, overlap, count)
    bound = probability_bound(sensitive_bert_dir, WIDTH)
    assert np.abs(served - outside).max() <= bound
    assert np.abs(served - first_windows).max() > 10 * bound  # the windows past the first count
    _the_representation_is_one_row_a_document_whatever_it_is_batched_with(summary.pushed_dir, pages)

    source = tmp_path / "pages.csv"
    with source.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([["page"], *([p] for p in pages[:-1])])  # an empty text is a bad row there
    output = tmp_path / "scored.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "predict", "--model", summary.pushed_dir, "--input", str(source),
         "--output", str(output), "--text-column", "page", "--precision", "fp32"],  # compared with fp32's answers
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    scored = [json.loads(line) for line in output.read_text().splitlines()]
    labels = summary.label_names
    assert len(scored) == len(pages) - 1
    assert np.abs(np.array([[row[f"p_{n}"] for n in labels] for row in scored]) - served[:-1]).max() <= bound


def _the_representation_is_one_row_a_document_whatever_it_is_batched_with(pushed_dir, pages) -> None:
    """The monitor's signature on windowed documents: a row a document (its windows' mean), the same alone."""
    import tensorflow as tf

    from models.serving.pushed_model import load_serving_model

    _, model = load_serving_model(pushed_dir)
    represent = model.signatures["representation"]
    together = represent(text=tf.constant(pages[:4]))["representation"].numpy()
    alone = represent(text=tf.constant(pages[1:2]))["representation"].numpy()
    assert together.shape[0] == 4 and np.isfinite(together).all()
    np.testing.assert_allclose(together[1], alone[0], atol=1e-4)
