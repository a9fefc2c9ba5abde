"""Users' own data, end to end under LocalDagRunner with the tiny BERT: every dataset shape the config can
select runs through the real components, is blessed, pushed, and answers with its own label names.

- 3 string labels (spaces, non-ASCII) from a plain CSV path with custom column names and missing texts dropped;
- sentence pairs with ClassLabel labels from a save_to_disk folder;
- integer labels from JSON lines shards named by a glob.
"""

import collections
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
from tests.hf_export_check import PAIR_TEXTS, hf_probabilities, serving_probabilities
from tests.serve_request import FP32, ask, predict_line
from tests.tiny_model import tiny_overrides

pytestmark = pytest.mark.e2e


WIDTH = 48  # max_seq_length of these runs


def run_config(
    workdir: Path, model_dir: Path, settings: dict | None = None, **dataset
) -> pipeline_config.PipelineConfig:
    overrides = {**tiny_overrides(workdir, model_dir, WIDTH), **(settings or {}), "dataset": dataset}
    return pipeline_config.load_config(overrides=overrides)


@pytest.fixture(scope="module")
def three_class(tmp_path_factory, tiny_bert_dir):
    workdir = tmp_path_factory.mktemp("three-class")
    csv_path = user_datasets.write_three_class_csv(workdir / "data" / "reviews.csv", per_class=110, missing_texts=6)
    config = run_config(
        workdir,
        tiny_bert_dir,
        name=str(csv_path),
        text_column="review",
        label_column="kind",
        missing_text="drop",
    )
    return config, csv_path, run_local(config)


def test_plain_csv_path_infers_the_builder(three_class):
    config, csv_path, _ = three_class
    assert (config.dataset.name, config.dataset.data_files) == ("csv", (str(csv_path),))


def test_three_classes_train_evaluate_bless_and_push(three_class):
    _, _, summary = three_class
    assert summary.label_names == sorted(user_datasets.THREE_CLASS_LABELS.values())
    assert summary.blessed is True and summary.pushed_dir
    assert 0 <= summary.metrics["accuracy"] <= 1 and 0 <= summary.metrics["auc"] <= 1
    assert {"auc_pr", "precision", "recall", "example_count"} <= set(summary.metrics)
    assert set(summary.per_class) == set(summary.label_names)
    assert all({"auc", "precision", "recall"} <= set(v) for v in summary.per_class.values())
    assert {f"label_name={name}" for name in summary.label_names} <= set(summary.slices)


def test_missing_texts_are_dropped_and_counted(three_class):
    import csv

    _, csv_path, summary = three_class
    with csv_path.open(encoding="utf-8") as handle:
        empty = sum(1 for row in csv.DictReader(handle) if not row["review"])
    assert empty >= 6
    assert sum(summary.dropped_counts.values()) == empty
    assert sum(summary.split_counts.values()) == 330 - empty
    assert "dropped" in summary.render()


def test_pushed_three_class_model_answers_with_k_probabilities_and_names(three_class):
    _, _, summary = three_class
    answer = ask(summary.pushed_dir, {"instances": ["a warm and moving film", "A man travels to Rome to find"]})
    for prediction in answer["predictions"]:
        assert len(prediction["probabilities"]) == 3
        assert abs(sum(prediction["probabilities"]) - 1) < 1e-5
        assert prediction["label"] in user_datasets.THREE_CLASS_LABELS.values()


def test_predict_cli_shows_label_names_and_k_probabilities(three_class):
    _, _, summary = three_class
    line = predict_line(summary.pushed_dir, "a dull mess")
    assert any(name in line for name in user_datasets.THREE_CLASS_LABELS.values())
    assert line.count("0.") + line.count("1.0") >= 3


def test_report_shows_the_k_by_k_confusion_matrix_and_per_class_curves(three_class, tmp_path):
    from pipeline.reporting.report import build_report

    config, _, _ = three_class
    page = build_report(config.metadata_sqlite, config.pipeline_name, tmp_path / "report.html").read_text()
    assert "confusion matrix (3 classes)" in page and "one-vs-rest ROC" in page
    assert "plot synopsis" in page and "dropped" in page


@pytest.fixture(scope="module")
def pairs(tmp_path_factory, tiny_bert_dir):
    workdir = tmp_path_factory.mktemp("pairs")
    folder = user_datasets.write_review_plot_pairs(workdir / "data" / "pairs", pairs=360)
    config = run_config(
        workdir, tiny_bert_dir, name=str(folder), text_column="review", text_pair_column="synopsis",
        label_column="match",
    )  # fmt: skip
    return config, run_local(config)


def test_pair_model_is_blessed_pushed_and_answers_pairs(pairs, tiny_bert_dir):
    _, summary = pairs
    assert summary.label_names == user_datasets.PAIR_LABELS
    assert summary.blessed is True and summary.pushed_dir
    answer = ask(
        summary.pushed_dir,
        {"instances": [{"text": "a dazzling heist film", "text_pair": "Three blind men rob a bank."}] * 2},
    )
    assert len(answer["predictions"]) == 2
    assert answer["predictions"][0]["label"] in user_datasets.PAIR_LABELS
    by_example = ask(
        summary.pushed_dir,
        {"signature_name": "serving_tf_example",
         "examples": [{"text": "a dazzling heist film", "text_pair": "Three blind men rob a bank."}]},
    )  # fmt: skip
    assert by_example["predictions"][0]["probabilities"] == pytest.approx(
        answer["predictions"][0]["probabilities"], abs=probability_bound(tiny_bert_dir, WIDTH)
    )  # one row against two: other shapes, the same model


def test_pair_models_hugging_face_export_agrees_with_the_saved_model(pairs):
    _, summary = pairs
    texts = ["a dazzling heist film", "dull " * 40, "", "a heist"]
    hf, id2label = hf_probabilities(summary.hf_model_dir, texts, PAIR_TEXTS)
    served = serving_probabilities(summary.pushed_dir, texts, PAIR_TEXTS)
    assert list(id2label.values()) == user_datasets.PAIR_LABELS
    assert hf.shape == served.shape == (len(texts), len(user_datasets.PAIR_LABELS))
    assert np.abs(hf - served).max() < 1e-4


def test_pair_model_reads_the_second_text(pairs):
    """token_type_ids carry the segments: swapping the texts changes the answer."""
    import tensorflow as tf

    from models.serving.pushed_model import load_serving_model

    _, summary = pairs
    _, model = load_serving_model(summary.pushed_dir)
    serve = model.signatures["serving_default"]
    a, b = tf.constant(["a dazzling heist film"]), tf.constant(["Three blind men rob a bank in Mumbai."])
    forward = serve(text=a, text_pair=b)["probabilities"].numpy()
    swapped = serve(text=b, text_pair=a)["probabilities"].numpy()
    assert abs(forward - swapped).max() > 1e-6
    with pytest.raises(TypeError):
        serve(text=a)  # a pair model needs both texts


@pytest.fixture(scope="module")
def integer_labels(tmp_path_factory, tiny_bert_dir):
    workdir = tmp_path_factory.mktemp("jsonl")
    pattern = user_datasets.write_int_label_jsonl(workdir / "data", per_class=110)
    # training.dropout and training.freeze_embeddings set: the Trainer builds the model with every dropout layer
    # at 0 and its input embeddings frozen (the other runs keep the checkpoint's rates and train everything);
    # training.packing false: one text a row at the batch widths, where the other one-replica runs pack;
    # training.label_smoothing 0.1: three labels' targets softened (the loss itself: trainer/module_test.py).
    config = run_config(
        workdir,
        tiny_bert_dir,
        # bf16 is opt-in on CPUs: this scenario runs that branch on any CPU. Its answers are defined to bf16's
        # 8 bits, so the scenarios that compare probabilities across shapes (float_bounds) train in float32.
        # and no width is given: auto chooses it from the texts
        {
            "training.dropout": 0.0,
            "training.freeze_embeddings": "true",
            "training.precision": "bf16",
            "training.packing": "false",
            "training.label_smoothing": "0.1",
            "model.max_seq_length": "auto",
            "model.long_texts": "head_tail",
        },
        name=pattern,
        text_column="sentence",
        label_column="score",
    )
    assert config.training.dropout == 0.0 and config.training.freeze_embeddings is True
    return config, run_local(config)


def test_integer_labels_from_jsonl_glob(integer_labels):
    config, summary = integer_labels
    assert config.dataset.name == "json"
    assert summary.label_names == ["0", "1", "2"]
    assert summary.blessed is True
    # the Trainer froze the embeddings and counted its FLOPs without the gradients it then skips
    assert summary.throughput["encoder"]["embeddings_trained"] is False
    assert summary.throughput["matmul_peak_dtype"] == "bfloat16"  # trained under mixed_bfloat16
    assert "packing off (training.packing: false)" in summary.lengths
    assert summary.throughput["padding_share_one_per_row"] is None  # not packed: no other padding to compare
    # auto's width, from the texts, is the one the Transform tokenized to and the summary states
    width = int(re.search(r"max_seq_length (\d+) \(auto: ", summary.lengths).group(1))
    assert width % 16 == 0 and width <= 128 and "sampled texts: median" in summary.lengths
    assert f"max_seq_length {width} (auto" in summary.render()
    tokenizer_config = json.loads((Path(summary.hf_model_dir) / "tokenizer_config.json").read_text())
    assert tokenizer_config["model_max_length"] == width  # the Trainer's export was cut at the chosen width
    answer = ask(summary.pushed_dir, {"instances": ["a tedious mess"]})
    assert answer["predictions"][0]["label"] in {"0", "1", "2"}


def test_long_texts_keep_their_head_and_tail_in_the_served_model_and_the_card_says_so(integer_labels, tiny_bert_dir):
    """model.long_texts: head_tail. The run's Transform graph (what training ran, and what the exported model
    embeds for serving) keeps a quarter of the budget from a long text's start and the rest from its end, id for
    id with the model's tokenizer."""
    import tensorflow as tf
    import tensorflow_transform as tft
    from transformers import AutoTokenizer

    config, summary = integer_labels
    width = int(re.search(r"max_seq_length (\d+) ", summary.lengths).group(1))
    text = " ".join(f"word{i}" for i in range(3 * width))
    (graph,) = Path(config.pipeline_root, "Transform", "transform_graph").iterdir()
    served = tft.TFTransformOutput(str(graph)).transform_features_layer()({"text": tf.constant([[text]])})
    hf = AutoTokenizer.from_pretrained(tiny_bert_dir)
    pieces, budget = hf(text, add_special_tokens=False)["input_ids"], width - 2
    head = round(budget * 0.25)
    want = [hf.cls_token_id, *pieces[:head], *pieces[len(pieces) - (budget - head) :], hf.sep_token_id]
    assert served["input_ids"].numpy()[0].tolist() == want
    card = (Path(summary.hf_model_dir) / "README.md").read_text()
    assert "keeps the head and the tail" in card and "long texts head_tail (head share 0.25)" in card
    assert "label smoothing 0.1" in card  # the recipe it was trained with


def predict_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "predict", *FP32, *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_batch_prediction_scores_a_csv_with_ids_through_and_bad_rows_aside(three_class, tiny_bert_dir, tmp_path):
    """The training CSV itself (empty reviews included) plus a short row, scored to parquet by `hftfx predict`:
    every row once, ids as read, the pushed model's probabilities, the short row set aside with its reason."""
    import pyarrow.parquet as pq

    _, csv_path, summary = three_class
    source = tmp_path / "to-score.csv"
    with csv_path.open(encoding="utf-8", newline="") as handle:
        records = len(list(csv.DictReader(handle)))
    extra = '9999,"a quoted review\nover two lines",fresh ✓\n10000\n'
    source.write_text(csv_path.read_text(encoding="utf-8") + extra, encoding="utf-8")
    output = tmp_path / "scored.parquet"
    # Parts an earlier run left when it was cut off before merging: cleared first, never merged into this run's
    for stale in ("scored.parquet.parts/part-00000-of-00003", "scored.bad.jsonl.parts/part-00000-of-00003"):
        (tmp_path / stale).parent.mkdir()
        (tmp_path / stale).write_text('{"reason": "a row of a run cut off", "row": "stale"}\n')
    done = predict_cli(
        "--model", summary.pushed_dir, "--input", str(source), "--output", str(output), "--text-column", "review",
        "--id-columns", "id,kind", "--log-dir", str(tmp_path / "logs"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    table = pq.read_table(output).to_pylist()
    _the_answers_are_logged_as_a_server_logs_them(tmp_path / "logs", table, source, summary, done.stdout)
    rows = records + 1  # the CSV's records and the two-line one; "10000" has no review
    assert len(table) == rows and len({r["id"] for r in table}) == rows
    labels = list(summary.label_names)
    assert set(table[0]) == {"id", "kind", "label", "score", *(f"p_{n}" for n in labels)}
    by_id = {r["id"]: r for r in table}
    reviews = {r["id"]: r["review"] for r in csv.DictReader(source.open(encoding="utf-8", newline=""))}
    sample = sorted(by_id)[:40]
    texts = [reviews[i] for i in sample]
    served = serving_probabilities(summary.pushed_dir, texts)
    scored = np.array([[by_id[i][f"p_{n}"] for n in labels] for i in sample])
    # the same model at other widths and row counts: within what float32 reordering allows (tests/float_bounds.py)
    bound = probability_bound(tiny_bert_dir, WIDTH)
    assert np.abs(served - scored).max() <= bound
    # and the comparison has teeth: another model (one weight changed) or another tokenization (the texts' first
    # halves) is outside, even for this barely trained model whose answers move little with the text
    # (models/serving/signatures_test.py shows unmasked padding outside too)
    assert np.abs(serving_probabilities(summary.pushed_dir, texts, head_bias_change=0.01) - scored).max() > 10 * bound
    cut = [" ".join(t.split()[: max(1, len(t.split()) // 2)]) for t in texts]
    assert np.abs(serving_probabilities(summary.pushed_dir, cut) - scored).max() > bound
    assert all(by_id[i]["label"] == labels[int(np.argmax(p))] for i, p in zip(sample, scored, strict=True))
    bad = [json.loads(line) for line in (tmp_path / "scored.bad.jsonl").read_text().splitlines()]
    assert bad == [{"reason": "'review' is missing (text)", "row": {"id": "10000", "review": None, "kind": None}}]
    assert f"scored        {rows:,} rows" in done.stdout and "bad rows      1 written to" in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs", "scored.bad.jsonl", "scored.parquet", "to-score.csv"]
    (distribution,) = [line for line in done.stdout.splitlines() if line.startswith("labels ")]
    assert sum(int(n.replace(",", "")) for n in re.findall(r"([\d,]+) \(", distribution)) == rows


def _the_answers_are_logged_as_a_server_logs_them(logs, table, source, summary, stdout) -> None:
    """`--log-dir`: every scored row in the prediction log `hftfx monitor` reads, under the pushed version."""
    from models.serving.prediction_log import read_window
    from models.serving.pushed_model import resolve_version_dir

    window = read_window(str(logs))
    version = Path(str(resolve_version_dir(summary.pushed_dir))).name
    assert window.version == version and len(window.rows) == len(table) and not window.skipped_lines
    assert f"logged        {len(table):,} rows to {logs}/version={version}" in stdout
    reviews = {r["review"]: r["id"] for r in csv.DictReader(source.open(encoding="utf-8", newline=""))}
    by_id = {r["id"]: r for r in table}
    for row in window.rows[:20]:
        scored = by_id[reviews[row["text"]]]
        assert row["label"] == scored["label"] and row["signature"] == "batch"
        assert row["probabilities"] == pytest.approx([scored[f"p_{n}"] for n in summary.label_names])


def test_batch_prediction_of_pairs_from_a_save_to_disk_folder(pairs, tmp_path):
    import datasets

    config, summary = pairs
    output = tmp_path / "scored.jsonl"
    common = ("--model", summary.pushed_dir, "--input", config.dataset.name, "--output", str(output))
    refused = predict_cli(*common, "--text-column", "review")
    assert refused.returncode == 2 and "sentence-pair model: name the second text with --text-pair-column" in (
        refused.stderr
    )
    done = predict_cli(*common, "--text-column", "review", "--text-pair-column", "synopsis")
    assert done.returncode == 0, done.stderr[-3000:]
    scored = [json.loads(line) for line in output.read_text().splitlines()]
    source = datasets.load_from_disk(config.dataset.name)
    assert len(scored) == len(source) and not (tmp_path / "scored.bad.jsonl").exists()
    assert set(scored[0]) == {"match", "label", "score", *(f"p_{n}" for n in user_datasets.PAIR_LABELS)}
    # A DatasetDict folder, as training reads one: every split's rows, each carrying its split
    datasets.DatasetDict({"train": source.select(range(20)), "test": source.select(range(20, 30))}).save_to_disk(
        str(tmp_path / "splits")
    )
    by_split = tmp_path / "by-split.csv"
    done = predict_cli(
        "--model", summary.pushed_dir, "--input", str(tmp_path / "splits"), "--output", str(by_split),
        "--text-column", "review", "--text-pair-column", "synopsis",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    with by_split.open() as handle:
        splits = collections.Counter(row["split"] for row in csv.DictReader(handle))
    assert splits == {"train": 20, "test": 10}


def test_batch_prediction_refuses_what_it_cannot_read_or_write_before_scoring(three_class, tmp_path, capsys):
    _, csv_path, summary = three_class
    output = str(tmp_path / "o.csv")
    no_column = predict_cli("--model", summary.pushed_dir, "--input", str(csv_path), "--output", output)
    assert no_column.returncode == 2 and "the input has no column ['text']; its columns: ['id', 'review', 'kind']" in (
        no_column.stderr
    )
    bad_output = predict_cli(
        "--model", summary.pushed_dir, "--input", str(csv_path), "--output", str(tmp_path / "o.xlsx"),
        "--text-column", "review",
    )  # fmt: skip
    assert bad_output.returncode == 2 and "unknown format '.xlsx'" in bad_output.stderr
    assert not list(tmp_path.iterdir())
    from pipeline.cli import main

    assert main(["predict", "--model", summary.pushed_dir, "a film", "--log-dir", str(tmp_path / "logs")]) == 2
    assert "--log-dir logs a batch job's answers (--input)" in capsys.readouterr().err
