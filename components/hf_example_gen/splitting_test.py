"""Label ids, split mapping, carving, limits and determinism, on real `datasets` objects."""

import datasets
import pytest

from components.hf_example_gen import splitting
from pipeline.configs import DatasetConfig


def _dataset(n, labels, text="review {}"):
    return datasets.Dataset.from_dict(
        {"text": [text.format(i) for i in range(n)], "label": [labels[i % len(labels)] for i in range(n)]}
    )


def test_classlabel_names_give_the_ids():
    ds = _dataset(10, [0, 1]).cast_column("label", datasets.ClassLabel(names=["neg", "pos"]))
    source = datasets.DatasetDict({"train": ds})
    config = DatasetConfig(name="x")
    names = splitting.label_names(source, config)
    assert names == ["neg", "pos"]
    assert splitting.label_ids(ds, "label", names, "train") == [0, 1] * 5


def test_string_labels_take_sorted_ids_and_declared_sets_win():
    source = datasets.DatasetDict({"train": _dataset(6, ["spam", "ham", "eggs"])})
    assert splitting.label_names(source, DatasetConfig(name="x")) == ["eggs", "ham", "spam"]
    declared = DatasetConfig(name="x", label_names=("spam", "ham", "eggs"))
    assert splitting.label_names(source, declared) == ["spam", "ham", "eggs"]
    assert splitting.label_ids(source["train"], "label", ["spam", "ham", "eggs"], "train")[:3] == [0, 1, 2]


def test_labels_outside_the_declared_set_are_named():
    ds = _dataset(4, ["pos", "neg", "meh"])
    with pytest.raises(splitting.DatasetContentError, match=r"outside the label set.*'meh'"):
        splitting.label_ids(ds, "label", ["neg", "pos"], "train")


def test_dataset_splits_map_onto_tfx_splits():
    source = datasets.DatasetDict(
        {"train": _dataset(50, [0, 1]), "validation": _dataset(7, [0, 1]), "test": _dataset(9, [0, 1])}
    )
    splits, origin = splitting.assign_splits(source, DatasetConfig(name="x"))
    assert {k: len(v) for k, v in splits.items()} == {"train": 50, "eval": 7, "test": 9}
    assert origin["eval"] == "dataset split 'validation'"


def test_missing_splits_are_carved_from_train_by_ratio_and_seed():
    source = datasets.DatasetDict({"train": _dataset(1000, [0, 1])})
    config = DatasetConfig(name="x")
    splits, _ = splitting.assign_splits(source, config)
    assert {k: len(v) for k, v in splits.items()} == {"train": 800, "eval": 100, "test": 100}
    texts = [set(splits[k]["text"]) for k in ("train", "eval", "test")]
    assert not (texts[0] & texts[1]) and not (texts[0] & texts[2]) and not (texts[1] & texts[2])
    again, _ = splitting.assign_splits(source, config)
    assert again["test"]["text"] == splits["test"]["text"]
    other_seed, _ = splitting.assign_splits(source, DatasetConfig(name="x", seed=7))
    assert other_seed["test"]["text"] != splits["test"]["text"]


def test_only_the_missing_split_is_carved():
    source = datasets.DatasetDict({"train": _dataset(100, [0, 1]), "test": _dataset(30, [0, 1])})
    splits, _ = splitting.assign_splits(source, DatasetConfig(name="x"))
    # train and eval share train's 0.8 : 0.1 ratio; test is the dataset's own.
    assert {k: len(v) for k, v in splits.items()} == {"train": 89, "eval": 11, "test": 30}


def test_limits_sample_each_split():
    source = datasets.DatasetDict({"train": _dataset(1000, [0, 1])})
    config = DatasetConfig(name="x", limits={"train": 120, "test": 10})
    splits, origin = splitting.assign_splits(source, config)
    assert (len(splits["train"]), len(splits["eval"]), len(splits["test"])) == (120, 100, 10)
    assert "limited to 120" in origin["train"]


def test_empty_split_is_an_error():
    source = datasets.DatasetDict({"train": _dataset(5, [0, 1]), "test": _dataset(0, [0, 1])})
    with pytest.raises(splitting.DatasetContentError, match=r"split .test.*is empty"):
        splitting.assign_splits(source, DatasetConfig(name="x"))


def test_wrong_column_names_list_the_real_columns():
    source = datasets.DatasetDict({"train": _dataset(4, [0, 1])})
    with pytest.raises(splitting.DatasetContentError, match=r"text column 'sentence'.*\['text', 'label'\]"):
        splitting.check_columns(source, DatasetConfig(name="x", text_column="sentence"))


def test_non_string_text_is_refused():
    ds = datasets.Dataset.from_dict({"text": [1, 2], "label": [0, 1]})
    with pytest.raises(splitting.DatasetContentError, match="not strings"):
        splitting.check_columns(datasets.DatasetDict({"train": ds}), DatasetConfig(name="x"))


def _with_missing():
    return datasets.Dataset.from_dict(
        {"text": ["a", None, "c", "d", None, "f"], "pair": ["x", "y", None, "w", "v", "u"],
         "label": ["pos", "neg", "pos", None, "neg", "pos"]}
    )  # fmt: skip


def test_missing_values_are_an_error_naming_the_rows_and_the_option():
    config = DatasetConfig(name="x", text_pair_column="pair")
    with pytest.raises(splitting.DatasetContentError) as error:
        splitting.split_rows(_with_missing(), config, ["neg", "pos"], "train")
    message = str(error.value)
    assert "text in 2 row(s), first row 1" in message and "text_pair in 1 row(s), first row 2" in message
    assert "label in 1 row(s), first row 3" in message and "--missing-text drop" in message


def test_missing_values_dropped_under_drop_and_counted():
    config = DatasetConfig(name="x", text_pair_column="pair", missing_text="drop")
    rows = splitting.split_rows(_with_missing(), config, ["neg", "pos"], "train")
    assert (rows.texts, rows.text_pairs, rows.label_ids, rows.dropped) == (["a", "f"], ["x", "u"], [1, 1], 4)
    assert list(rows.rows()) == [("a", "x", 1), ("f", "u", 1)]


def test_classlabel_minus_one_counts_as_missing():
    ds = _dataset(4, [0, 1, -1, 1]).cast_column("label", datasets.ClassLabel(names=["neg", "pos"]))
    rows = splitting.split_rows(ds, DatasetConfig(name="x", missing_text="drop"), ["neg", "pos"], "train")
    assert rows.dropped == 1 and rows.label_ids == [0, 1, 1]


def test_integer_and_bool_labels_keep_their_numeric_order():
    ints = datasets.DatasetDict({"train": _dataset(12, [10, 2, 0, 1])})
    assert splitting.label_names(ints, DatasetConfig(name="x")) == ["0", "1", "2", "10"]
    bools = datasets.DatasetDict({"train": _dataset(4, [True, False])})
    assert splitting.label_names(bools, DatasetConfig(name="x")) == ["False", "True"]
    assert splitting.label_ids(bools["train"], "label", ["False", "True"], "train") == [1, 0, 1, 0]


def test_a_missing_pair_column_is_named_with_the_flag():
    source = datasets.DatasetDict({"train": _dataset(4, ["a", "b"])})
    with pytest.raises(splitting.DatasetContentError, match=r"text_pair column 'hypothesis'.*--text-pair-column"):
        splitting.check_columns(source, DatasetConfig(name="x", text_pair_column="hypothesis"))
