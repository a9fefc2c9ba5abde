"""Multi-label classification end to end under LocalDagRunner with the tiny BERT: a list of tags per row
(JSON lines, [] for none) and several 0/1 columns (CSV, dataset.label_columns) with balanced class weights
and a per-label decision threshold. Each trains a sigmoid per label, is evaluated with per-label and macro
metrics, blessed, pushed, and served (fresh process, as TF Serving would) with per-label probabilities and
the labels over their thresholds."""

import subprocess
import sys

import pytest

from models.task import read_contract
from pipeline.config import pipeline_config
from pipeline.orchestration.local_runner import run_local
from tests import user_datasets
from tests.serve_request import ask, predict_line
from tests.tiny_model import tiny_overrides

pytestmark = pytest.mark.e2e
TAGS = list(user_datasets.MULTI_LABEL_TAGS)


def config_for(workdir, model_dir, **overrides):
    return pipeline_config.load_config(overrides={**tiny_overrides(workdir, model_dir, 48), **overrides})


@pytest.fixture(scope="module")
def lists(tmp_path_factory, tiny_bert_dir):
    workdir = tmp_path_factory.mktemp("multi-label")
    path = user_datasets.write_multi_label_jsonl(workdir / "data" / "tags.jsonl", per_class=150)
    config = config_for(
        workdir, tiny_bert_dir,
        # packed batches carry each text's label vector as one text a row does
        **{"dataset.name": str(path), "dataset.label_column": "tags", "training.epochs": 2, "training.packing": True},
    )  # fmt: skip
    assert not config.dataset.multi_label  # found by the probe from the rows
    return config, run_local(config)


@pytest.fixture(scope="module")
def columns(tmp_path_factory, tiny_bert_dir):
    workdir = tmp_path_factory.mktemp("tag-columns")
    path = user_datasets.write_tag_columns_csv(workdir / "data" / "tags.csv", per_class=150)
    config = config_for(
        workdir,
        tiny_bert_dir,
        **{
            "dataset.name": str(path),
            "dataset.text_column": "review",
            "dataset.label_columns": TAGS,
            "training.class_weights": "balanced",
            "evaluation.decision_thresholds": {"long": 0.3},
        },
    )
    return config, run_local(config)


def test_list_labels_train_a_multi_label_model_blessed_on_macro_auc(lists):
    _, summary = lists
    assert summary.task == "multi_label" and summary.label_names == sorted(TAGS)
    assert summary.outcome == "complete" and summary.blessed is True and summary.pushed_dir
    assert {"auc", "auc_pr", "macro_f1", "subset_accuracy", "hamming_loss", "precision", "recall"} <= set(
        summary.metrics
    )
    assert "accuracy" not in summary.metrics
    assert set(summary.per_class) == set(TAGS)
    for values in summary.per_class.values():
        assert {"auc", "precision", "recall", "f1"} <= set(values)
    assert {f"label_name={tag}" for tag in TAGS} <= set(summary.slices)  # a slice per label: the rows tagged
    assert summary.training.epochs_run == 2
    assert read_contract(summary.pushed_dir).task == "multi_label"


def test_packed_rows_train_label_vectors_with_fewer_padded_tokens(lists):
    _, summary = lists
    throughput = summary.throughput
    assert throughput["padding_share"] < throughput["padding_share_one_per_row"]
    assert "(texts packed in rows: " in summary.render()


def test_empty_tag_lists_are_rows_with_no_label(lists):
    _, summary = lists
    tagged = sum(summary.label_counts["train"].values())
    rows = summary.split_counts["train"]
    assert rows > 0 and summary.label_counts["train"]["praise"] < rows
    assert tagged != rows  # rows carry 0, 1 or 2 tags


def test_served_multi_label_model_answers_per_label_probabilities_and_labels(lists):
    _, summary = lists
    answer = ask(summary.pushed_dir, {"instances": ["a warm and moving film", "A man travels to Rome to find"]})
    for prediction in answer["predictions"]:
        assert len(prediction["probabilities"]) == 3 and all(0 <= p <= 1 for p in prediction["probabilities"])
        chosen = [label for label in prediction["labels"] if label]
        assert len(chosen) == prediction["label_count"]
        expected = [t for t, p in zip(summary.label_names, prediction["probabilities"], strict=True) if p >= 0.5]
        assert chosen == expected


def test_predict_cli_shows_the_answered_labels(lists):
    _, summary = lists
    line = predict_line(summary.pushed_dir, "a dull mess")
    (answer,) = ask(summary.pushed_dir, {"instances": ["a dull mess"]})["predictions"]
    shown = ", ".join(label for label in answer["labels"] if label) or "(no label)"
    assert line.strip().startswith(shown)
    assert line.count("0.") + line.count("1.0") >= 3


def test_runs_lists_the_multi_label_task(lists):
    config, _ = lists
    done = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "runs", "--set", f"pipeline_root={config.pipeline_root}"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    header, row = done.stdout.strip().splitlines()[-2:]
    assert "task" in header and "labels" in header
    assert "multi-label" in row and "long,praise,synopsis" in row


def test_label_columns_with_balanced_positive_weights_and_a_threshold(columns):
    _, summary = columns
    assert summary.task == "multi_label" and summary.label_names == TAGS  # the columns' order
    assert summary.blessed is True and summary.pushed_dir
    counts, rows = summary.label_counts["train"], summary.split_counts["train"]
    expected = {tag: (rows - counts[tag]) / counts[tag] for tag in TAGS}
    assert summary.training.class_weights == pytest.approx(expected)
    assert "positive weight per label" in summary.render()
    answer = ask(summary.pushed_dir, {"instances": ["an overlong, meandering and tedious tale of a man"] * 2})
    probabilities = answer["predictions"][0]["probabilities"]
    chosen = [label for label in answer["predictions"][0]["labels"] if label]
    thresholds = {"praise": 0.5, "synopsis": 0.5, "long": 0.3}
    assert chosen == [t for t, p in zip(TAGS, probabilities, strict=True) if p >= thresholds[t]]
