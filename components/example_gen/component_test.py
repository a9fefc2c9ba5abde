"""The ExampleGen as a real TFX component under LocalDagRunner, reading local files and the packaged corpus."""

import collections
import glob
import json

import datasets
import pytest
import tensorflow as tf

from components.example_gen.config import DatasetConfig
from components.example_gen.sources import packaged_rotten_tomatoes


def _custom(artifact, name: str):
    """A custom property of an ML Metadata artifact, whatever its value's kind."""
    value = artifact.custom_properties[name]
    return getattr(value, value.WhichOneof("value"))


def read_split(artifact, split):
    files = glob.glob(f"{artifact.uri}/Split-{split}/*.gz")
    records = tf.data.TFRecordDataset(files, compression_type="GZIP")
    return [tf.train.Example.FromString(r.numpy()) for r in records]


def test_packaged_corpus_has_the_expected_reviews(tmp_path, monkeypatch):
    """With an empty datasets cache, as on a fresh machine (a cached earlier load once hid a crash there)."""
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets-cache")
    train = packaged_rotten_tomatoes()["train"]
    assert train.features["label"].names == ["rotten", "fresh"]
    counts = collections.Counter(row["label"] for row in train)
    assert counts == {1: 7403, 0: 5405}


def test_csv_with_string_labels_keeps_label_zero_and_records_metadata(tmp_path, run_example_gen):
    path = tmp_path / "reviews.csv"
    rows = [row for i in range(30) for row in ((f"great film {i}", "pos"), (f"awful film {i}", "neg"))]
    datasets.Dataset.from_dict({"review": [r[0] for r in rows], "sentiment": [r[1] for r in rows]}).to_csv(path)
    artifact = run_example_gen(
        tmp_path,
        DatasetConfig(name="csv", data_files=(str(path),), text_column="review", label_column="sentiment", span=3),
    )
    assert json.loads(_custom(artifact, "label_names")) == ["neg", "pos"]
    counts = json.loads(_custom(artifact, "split_counts"))
    assert sum(counts.values()) == 60 and 40 <= counts["train"] <= 56 and min(counts.values()) > 0, counts
    assert artifact.properties["span"].int_value == 3
    assert len(_custom(artifact, "dataset_fingerprint")) == 32
    examples = read_split(artifact, "train")
    labels = [e.features.feature["label"].int64_list.value for e in examples]
    assert all(len(v) == 1 for v in labels), "every example carries its label, 0 included"
    assert set(collections.Counter(v[0] for v in labels)) == {0, 1}
    names = {e.features.feature["label_name"].bytes_list.value[0] for e in examples}
    assert names == {b"neg", b"pos"}
    neg = next(e for e in examples if e.features.feature["label"].int64_list.value[0] == 0)
    assert neg.features.feature["text"].bytes_list.value[0].startswith(b"awful film")


def test_save_to_disk_folder_with_all_splits(tmp_path, run_example_gen):
    folder = tmp_path / "saved"
    label = datasets.ClassLabel(names=["a", "b", "c"])

    def part(n):
        return datasets.Dataset.from_dict(
            {"text": [f"t{i}" for i in range(n)], "label": [i % 3 for i in range(n)]}
        ).cast_column("label", label)

    datasets.DatasetDict({"train": part(30), "validation": part(6), "test": part(9)}).save_to_disk(str(folder))
    artifact = run_example_gen(tmp_path, DatasetConfig(name=str(folder), limits={"train": 12}))
    assert json.loads(_custom(artifact, "split_counts")) == {"train": 12, "eval": 6, "test": 9}
    assert json.loads(_custom(artifact, "label_names")) == ["a", "b", "c"]
    assert len(read_split(artifact, "test")) == 9


def test_missing_local_files_are_named(tmp_path):
    from components.example_gen.sources import DatasetSourceError, load_source

    with pytest.raises(DatasetSourceError, match="not found"):
        load_source(DatasetConfig(name="csv", data_files=(str(tmp_path / "nope.csv"),)))


def test_newest_span_window_and_a_fixed_test_file_are_read_and_recorded(tmp_path, run_example_gen):
    for span in (1, 2, 3):
        rows = [(f"span {span} good {i}", "pos") for i in range(10)] + [
            (f"span {span} bad {i}", "neg") for i in range(10)
        ]
        folder = tmp_path / "data" / f"span-{span}"
        folder.mkdir(parents=True)
        datasets.Dataset.from_dict({"text": [r[0] for r in rows], "label": [r[1] for r in rows]}).to_csv(
            folder / "part.csv"
        )
    golden = tmp_path / "golden.csv"
    datasets.Dataset.from_dict({"text": ["fine", "poor"], "label": ["pos", "neg"]}).to_csv(golden)
    config = DatasetConfig(
        name="csv",
        split_files={"train": (f"{tmp_path}/data/span-{{SPAN}}/*.csv",), "test": (str(golden),)},
        split_sources={"train": "train", "eval": "validation", "test": "test"},
        span_window=2,
    )
    artifact = run_example_gen(tmp_path, config)
    assert artifact.properties["span"].int_value == 3
    assert json.loads(_custom(artifact, "spans")) == [2, 3]
    assert len(_custom(artifact, "input_fingerprint")) == 32
    train = read_split(artifact, "train") + read_split(artifact, "eval")
    texts = {e.features.feature["text"].bytes_list.value[0].decode() for e in train}
    assert {t.split()[1] for t in texts} == {"2", "3"}, "span 1 is outside the window"
    assert len(texts) == 40
    test = [e.features.feature["text"].bytes_list.value[0] for e in read_split(artifact, "test")]
    assert sorted(test) == [b"fine", b"poor"]


def _texts_by_split(artifact):
    return {
        split: sorted(e.features.feature["text"].bytes_list.value[0] for e in read_split(artifact, split))
        for split in ("train", "eval", "test")
    }


def test_splits_are_the_same_in_both_direct_runner_modes_and_in_process(tmp_path, run_example_gen):
    """Four CSV shards read by two worker processes place every row as one process does, and as the preflight's
    in-process placement does: the split is a property of the row, not of who read it or in what order."""
    from components.example_gen.dataset_pass import EVERY_ROW, dataset_pass

    labels = ["neg", "neutral", "pos"]
    for shard in range(4):
        rows = [(f"shard {shard} review {i}", labels[(i + shard) % 3]) for i in range(150)]
        datasets.Dataset.from_dict({"text": [r[0] for r in rows], "label": [r[1] for r in rows]}).to_csv(
            tmp_path / f"part-{shard}.csv"
        )
    config = DatasetConfig(name="csv", data_files=(f"{tmp_path}/part-*.csv",), limits={"test": 40})
    in_memory = run_example_gen(tmp_path, config, root="in-memory")
    multi = run_example_gen(
        tmp_path,
        config,
        ("--direct_running_mode=multi_processing", "--direct_num_workers=2"),
        root="multi-processing",
    )
    assert json.loads(_custom(multi, "label_names")) == labels, "the distinct-values pass in Beam found them"
    counts = json.loads(_custom(multi, "split_counts"))
    assert counts == json.loads(_custom(in_memory, "split_counts")) and counts["test"] == 40, counts
    assert sum(counts.values()) < 600 and counts["train"] > 400
    assert _texts_by_split(multi) == _texts_by_split(in_memory)
    found = dataset_pass(config, EVERY_ROW)
    names, placed = found.label_names, found.placed
    assert names == labels
    assert {s: sorted(r.text.encode() for r in rows) for s, rows in placed.rows.items()} == _texts_by_split(multi)
    assert _custom(multi, "dataset_fingerprint") == _custom(in_memory, "dataset_fingerprint")
