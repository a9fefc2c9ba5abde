"""Drift of K-class label distributions, measured by TFDV's own L-infinity comparator."""

import pytest

from pipeline.config.pipeline_config import RetrainingConfig
from pipeline.retraining import drift


def _profile(counts: dict[str, int]):
    labels = [name for name, n in counts.items() for _ in range(n)]
    texts = ["a review of some length"] * len(labels)
    return drift.profile(texts, labels, [5] * len(labels))


def test_three_class_label_shift_is_the_largest_share_change():
    baseline = _profile({"fresh ✓": 40, "rotten ✗": 40, "plot synopsis": 20})
    shifted = _profile({"fresh ✓": 20, "rotten ✗": 40, "plot synopsis": 40})  # fresh -0.2, plot +0.2
    features = {f.feature: f for f in drift.compare(baseline, shifted, RetrainingConfig())}
    label = features["label_name"]
    assert label.distance == pytest.approx(0.2, abs=1e-6)
    assert label.drifted  # above the default 0.1
    assert not features["text_length"].drifted


def test_a_class_that_appears_only_now_counts_as_drift():
    baseline = _profile({"fresh ✓": 50, "rotten ✗": 50})
    current = _profile({"fresh ✓": 40, "rotten ✗": 40, "plot synopsis": 20})
    label = {f.feature: f for f in drift.compare(baseline, current, RetrainingConfig())}["label_name"]
    assert label.distance == pytest.approx(0.2, abs=1e-6) and label.drifted


def test_a_span_is_read_as_a_bounded_hash_sample_of_its_train_rows(tmp_path, monkeypatch):
    from pipeline.config.pipeline_config import load_config
    from tests import span_data

    rows = span_data.reviews(400, seed=3)
    span_data.write_span(tmp_path / "data", 1, rows)
    config = load_config(
        overrides={
            "pipeline_root": str(tmp_path / "root"),
            "dataset.name": "csv",
            "dataset.split_files": {"train": [f"{tmp_path}/data/span-{{SPAN}}/*.csv"]},
            "dataset.label_names": list(span_data.LABELS),
        }
    )
    monkeypatch.setattr(drift, "DRIFT_SAMPLE_ROWS", 50)
    texts, labels = drift.read_span(config, 1)
    assert len(texts) == len(labels) == 50
    assert set(zip(texts, labels, strict=True)) <= set(rows) and set(labels) == set(span_data.LABELS)
    assert drift.read_span(config, 1) == (texts, labels), "the same rows on every read"


def test_written_examples_are_read_as_a_bounded_hash_sample(tmp_path, monkeypatch):
    import tensorflow as tf

    from models.names import LABEL_NAME_FEATURE, TEXT_FEATURE

    def example(text, label):
        feature = {
            TEXT_FEATURE: tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode()])),
            LABEL_NAME_FEATURE: tf.train.Feature(bytes_list=tf.train.BytesList(value=[label.encode()])),
        }
        return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()

    written = [(f"review {i}", "fresh" if i % 3 else "rotten") for i in range(120)]
    (tmp_path / "Split-train").mkdir()
    with tf.io.TFRecordWriter(str(tmp_path / "Split-train" / "data.gz"), options="GZIP") as writer:
        for text, label in written:
            writer.write(example(text, label))
    monkeypatch.setattr(drift, "DRIFT_SAMPLE_ROWS", 30)
    texts, labels = drift.read_examples(str(tmp_path))
    assert len(texts) == 30 and set(zip(texts, labels, strict=True)) <= set(written)
    assert texts != [text for text, _ in written[:30]], "a sample across the split, not its first rows"
    monkeypatch.setattr(drift, "DRIFT_SAMPLE_ROWS", 1000)
    assert sorted(drift.read_examples(str(tmp_path))[0]) == sorted(text for text, _ in written)


def test_a_span_of_list_labels_is_read_by_drift_as_the_run_reads_it(tmp_path, tiny_bert_dir):
    """Multi-label rows (a JSON list per row, no declared label set): the run's preflight takes them as a multi-label
    task, and drift's span reader, running the same dataset pass, takes them too, each row's labels as one value."""
    import json

    from pipeline.config.pipeline_config import load_config
    from pipeline.orchestration.preflight import check_model_and_data

    folder = tmp_path / "data" / "span-1"
    folder.mkdir(parents=True)
    tags = [["action"], ["comedy"], ["action", "comedy"], ["drama"], ["comedy", "drama"]]
    lines = [json.dumps({"text": f"film number {i} of the catalogue", "label": tags[i % 5]}) for i in range(300)]
    (folder / "part-0.jsonl").write_text("\n".join(lines) + "\n")
    config = load_config(
        overrides={
            "pipeline_root": str(tmp_path / "root"),
            "model.name": str(tiny_bert_dir),
            "dataset.name": "json",
            "dataset.data_files": [f"{tmp_path}/data/span-{{SPAN}}/*.jsonl"],
        }
    )
    assert not config.dataset.multi_label
    found = check_model_and_data(config).config.dataset
    assert found.multi_label and found.label_names == ("action", "comedy", "drama")
    texts, labels = drift.read_span(config, 1)
    assert len(texts) == len(labels) > 200
    assert set(labels) == {"action", "comedy", "action,comedy", "drama", "comedy,drama"}
