"""Label ids, split routing by hash, limits and the whole-output checks, on real `datasets` features."""

import collections

import datasets
import pytest

from components.example_gen import splitting
from components.example_gen.config import DatasetConfig


def _records(n, labels, text="review {}"):
    return [{"text": text.format(i), "label": labels[i % len(labels)]} for i in range(n)]


def _place(records, config, names, dataset_split="train", feature=None, splits=("train",)):
    plan = splitting.plan_splits(list(splits), config)
    index = {name: i for i, name in enumerate(names)}
    return [
        splitting.prepare_row(r, dataset_split, f"row {i}", config, index, feature, plan) for i, r in enumerate(records)
    ]


def test_classlabel_names_give_the_ids():
    feature = datasets.ClassLabel(names=["neg", "pos"])
    names = splitting.known_label_names(DatasetConfig(name="x"), [feature])
    assert names == ["neg", "pos"]
    rows = _place(_records(10, [0, 1]), DatasetConfig(name="x"), names, feature=feature)
    assert [r.label_id for r in rows] == [0, 1] * 5


def test_string_labels_take_sorted_ids_and_declared_sets_win():
    assert splitting.known_label_names(DatasetConfig(name="x"), [datasets.Value("string")]) is None
    assert splitting.names_from_values(["spam", "ham", "eggs", None]) == ["eggs", "ham", "spam"]
    declared = DatasetConfig(name="x", label_names=("spam", "ham", "eggs"))
    assert splitting.known_label_names(declared, [datasets.ClassLabel(names=["a", "b"])]) == ["spam", "ham", "eggs"]
    rows = _place(_records(3, ["spam", "ham", "eggs"]), declared, ["spam", "ham", "eggs"])
    assert [r.label_id for r in rows] == [0, 1, 2]


def test_scores_with_fractions_are_refused_and_whole_floats_stay_classes():
    """STS-B-style scores are regression targets, not 26 classes; 0.0 / 1.0 (a CSV integer column with gaps is
    read as floats) stay two classes."""
    assert splitting.names_from_values([1.0, 0.0, None, 1.0]) == ["0.0", "1.0"]
    with pytest.raises(splitting.DatasetContentError, match=r"column 'score' holds numbers with fractions \(0\.4, "):
        splitting.names_from_values([0.4, 2.0, 3.8, 5.0], "score")


def test_integer_and_bool_labels_keep_their_numeric_order():
    assert splitting.names_from_values([10, 2, 0, 1, 2]) == ["0", "1", "2", "10"]
    assert splitting.names_from_values([True, False]) == ["False", "True"]
    rows = _place(_records(4, [True, False]), DatasetConfig(name="x"), ["False", "True"])
    assert [r.label_id for r in rows] == [1, 0, 1, 0]


def test_labels_outside_the_declared_set_are_named():
    rows = _place(_records(4, ["pos", "neg", "meh"]), DatasetConfig(name="x"), ["neg", "pos"])
    issues = [r for r in rows if isinstance(r, splitting.RowIssue)]
    assert [i.unknown_label for i in issues] == ["meh"]
    with pytest.raises(splitting.DatasetContentError, match=r"outside the label set.*'meh'.*dataset.label_names"):
        raise splitting.issues_error(issues, DatasetConfig(name="x"), ["neg", "pos"])


def test_dataset_splits_map_onto_tfx_splits_and_unread_splits_are_skipped():
    plan = splitting.plan_splits(["train", "validation", "test", "unsupervised"], DatasetConfig(name="x"))
    assert {s: [t for t, _ in r] for s, r in plan.routes.items()} == {
        "train": ["train"],
        "validation": ["eval"],
        "test": ["test"],
    }
    assert plan.origin["eval"] == "dataset split 'validation'"
    config = DatasetConfig(name="x")
    assert _place(_records(2, ["a", "b"]), config, ["a", "b"], "unsupervised", splits=["train", "unsupervised"]) == [
        None,
        None,
    ]


def test_missing_splits_are_carved_from_train_by_hash_and_seed():
    config = DatasetConfig(name="x")
    records = _records(4000, ["neg", "pos"])
    placed = _place(records, config, ["neg", "pos"])
    counts = collections.Counter(r.split for r in placed)
    assert abs(counts["train"] - 3200) < 150 and abs(counts["eval"] - 400) < 80 and abs(counts["test"] - 400) < 80
    again = _place(list(reversed(records)), config, ["neg", "pos"])
    assert {r.text: r.split for r in again} == {r.text: r.split for r in placed}, "order does not matter"
    other_seed = _place(records, DatasetConfig(name="x", seed=7), ["neg", "pos"])
    assert [r.split for r in other_seed] != [r.split for r in placed]
    duplicate = _place([records[0]] * 20, config, ["neg", "pos"])
    assert len({r.split for r in duplicate}) == 1, "exact duplicates never straddle splits"


def test_only_the_missing_split_is_carved():
    plan = splitting.plan_splits(["train", "test"], DatasetConfig(name="x"))
    # train and eval share train's 0.8 : 0.1 ratio; test is the dataset's own.
    assert plan.routes["train"] == (("train", pytest.approx(0.8 / 0.9)), ("eval", pytest.approx(1.0)))
    assert plan.routes["test"] == (("test", 1.0),)


def test_limits_are_recorded_and_rank_rows_by_hash():
    plan = splitting.plan_splits(["train"], DatasetConfig(name="x", limits={"train": 120}))
    assert plan.limits == {"train": 120} and "limited to 120" in plan.origin["train"]
    rows = _place(_records(50, ["a", "b"]), DatasetConfig(name="x", limits={"train": 10}), ["a", "b"])
    limited = [r.rank for r in rows if r.split == "train"]
    assert len(set(limited)) == len(limited) > 30 and all(0 < rank < 1 for rank in limited)
    assert {r.rank for r in rows if r.split != "train"} == {0.0}, "only a limited split ranks its rows"
    unlimited = _place(_records(50, ["a", "b"]), DatasetConfig(name="x"), ["a", "b"])
    assert {r.rank for r in unlimited} == {0.0}, "no limit: no second hash per row"


def test_a_plan_without_the_train_source_is_refused():
    with pytest.raises(splitting.DatasetContentError, match=r"no 'train' split; it has \['other'\]"):
        splitting.plan_splits(["other"], DatasetConfig(name="x"))


def test_whole_output_checks_name_the_split():
    plan = splitting.plan_splits(["train", "test"], DatasetConfig(name="x"))
    with pytest.raises(splitting.DatasetContentError, match=r"split 'test' \(dataset split 'test'\) is empty"):
        splitting.check_split_counts({"train": {0: 5, 1: 5}, "eval": {0: 1, 1: 1}, "test": {}}, ["a", "b"], plan)
    with pytest.raises(splitting.DatasetContentError, match=r"split 'eval' holds a single class \('b'\)"):
        splitting.check_split_counts({"train": {0: 5, 1: 5}, "eval": {1: 2}, "test": {0: 1, 1: 1}}, ["a", "b"], plan)
    with pytest.raises(splitting.DatasetContentError, match=r"train split has no examples of \['c'\]"):
        counts = {"train": {0: 5, 1: 5}, "eval": {0: 1, 2: 1}, "test": {0: 1, 1: 1}}
        splitting.check_split_counts(counts, ["a", "b", "c"], plan)


def test_wrong_column_names_list_the_real_columns():
    features = datasets.Features({"text": datasets.Value("string"), "label": datasets.Value("int64")})
    with pytest.raises(splitting.DatasetContentError, match=r"text column 'sentence'.*\['text', 'label'\]"):
        splitting.check_features(features, DatasetConfig(name="x", text_column="sentence"), "train")
    with pytest.raises(splitting.DatasetContentError, match=r"label column 'y'.*\['text', 'label'\]"):
        _place(_records(2, ["a", "b"]), DatasetConfig(name="x", label_column="y"), ["a", "b"])


def test_non_string_text_is_refused():
    features = datasets.Features({"text": datasets.Value("int64"), "label": datasets.Value("int64")})
    with pytest.raises(splitting.DatasetContentError, match="not strings"):
        splitting.check_features(features, DatasetConfig(name="x"), "train")
    with pytest.raises(splitting.DatasetContentError, match=r"holds int values such as 1 \(row 0\), not strings"):
        _place([{"text": 1, "label": 0}], DatasetConfig(name="x"), ["0", "1"])


_WITH_MISSING = [
    {"text": "a", "pair": "x", "label": "pos"},
    {"text": None, "pair": "y", "label": "neg"},
    {"text": "c", "pair": None, "label": "pos"},
    {"text": "d", "pair": "w", "label": None},
    {"text": None, "pair": "v", "label": "neg"},
    {"text": "f", "pair": "u", "label": "pos"},
]


def test_missing_values_are_an_error_naming_the_rows_and_the_option():
    config = DatasetConfig(name="x", text_pair_column="pair", split_sources={"eval": "e", "test": "t"})
    rows = _place(_WITH_MISSING, config, ["neg", "pos"], splits=["train", "e", "t"])
    issues = [r for r in rows if isinstance(r, splitting.RowIssue)]
    assert all(splitting.blocking(i, config) for i in issues)
    message = str(splitting.issues_error(issues, config, ["neg", "pos"]))
    assert "text in 2 row(s), first row 1" in message and "text_pair in 1 row(s), first row 2" in message
    assert "label in 1 row(s), first row 3" in message and "--missing-text drop" in message


def test_missing_values_dropped_under_drop_and_pairs_kept():
    config = DatasetConfig(
        name="x", text_pair_column="pair", missing_text="drop", split_sources={"eval": "e", "test": "t"}
    )
    rows = _place(_WITH_MISSING, config, ["neg", "pos"], splits=["train", "e", "t"])
    issues = [r for r in rows if isinstance(r, splitting.RowIssue)]
    assert len(issues) == 4 and not any(splitting.blocking(i, config) for i in issues)
    kept = [(r.text, r.text_pair, r.label_id) for r in rows if isinstance(r, splitting.Row)]
    assert kept == [("a", "x", 1), ("f", "u", 1)]


def test_classlabel_minus_one_counts_as_missing():
    feature = datasets.ClassLabel(names=["neg", "pos"])
    rows = _place(_records(4, [0, 1, -1, 1]), DatasetConfig(name="x"), ["neg", "pos"], feature=feature)
    assert [r.missing if isinstance(r, splitting.RowIssue) else r.label_id for r in rows] == [0, 1, ("label",), 1]


def test_a_missing_pair_column_is_named_with_the_flag():
    with pytest.raises(splitting.DatasetContentError, match=r"text_pair column 'hypothesis'.*--text-pair-column"):
        _place(_records(2, ["a", "b"]), DatasetConfig(name="x", text_pair_column="hypothesis"), ["a", "b"])


# ---- multi-label ---------------------------------------------------------------------------------------------
MULTI = DatasetConfig(name="x", multi_label=True)


def test_list_labels_give_each_rows_label_ids_in_order_and_empty_lists_are_no_label():
    records = _records(3, [["sports", "politics"], [], ["sports", "sports"]])
    assert splitting.names_from_values([r["label"] for r in records]) == ["politics", "sports"]
    rows = _place(records, MULTI, ["politics", "sports"])
    assert [r.label_ids for r in rows] == [(0, 1), (), (1,)]


def test_lists_of_classlabel_ids_name_their_labels():
    feature = datasets.List(datasets.ClassLabel(names=["a", "b", "c"]))
    assert splitting.holds_lists(feature) and not splitting.holds_lists(datasets.ClassLabel(names=["a"]))
    assert splitting.known_label_names(DatasetConfig(name="x"), [feature]) == ["a", "b", "c"]
    rows = _place(_records(2, [[2, 0], [1]]), MULTI, ["a", "b", "c"], feature=feature)
    assert [r.label_ids for r in rows] == [(0, 2), (1,)]


def test_malformed_multi_label_rows_are_named_with_the_fix():
    with pytest.raises(splitting.DatasetContentError, match=r"holds 'sports' \(row 1\), not a list of labels"):
        _place(_records(2, [["sports"], "sports"]), MULTI, ["sports"])
    with pytest.raises(splitting.DatasetContentError, match=r"not a list of labels"):
        _place(_records(1, [[["nested"]]]), MULTI, ["nested"])
    with pytest.raises(splitting.DatasetContentError, match=r"holds a list \['a'\] \(row 0\).*dataset.multi_label"):
        _place(_records(1, [["a"]]), DatasetConfig(name="x"), ["a"])
    unknown = _place(_records(1, [["sports", "weather"]]), MULTI, ["sports"])
    assert unknown[0].unknown_label == "weather"


def test_label_columns_are_0_or_1_per_label():
    config = DatasetConfig(
        name="x", multi_label=True, label_columns=("toxic", "insult"), label_names=("toxic", "insult")
    )
    records = [{"text": "a", "toxic": 1, "insult": 0}, {"text": "b", "toxic": "true", "insult": "1"}]
    assert [r.label_ids for r in _place(records, config, ["toxic", "insult"])] == [(0,), (0, 1)]
    with pytest.raises(splitting.DatasetContentError, match=r"label column 'insult' holds 2 \(row 0\); each of"):
        _place([{"text": "a", "toxic": 1, "insult": 2}], config, ["toxic", "insult"])
    with pytest.raises(splitting.DatasetContentError, match=r"label column 'insult' is not in.*dataset.label_columns"):
        _place([{"text": "a", "toxic": 1}], config, ["toxic", "insult"])


def test_multi_label_counts_need_every_label_in_train_and_undefined_test_aucs_are_refused():
    plan = splitting.plan_splits(["train"], MULTI)
    totals = {"train": 10, "eval": 4, "test": 4}
    ok = {"train": {0: 3, 1: 5}, "eval": {0: 1}, "test": {0: 1, 1: 2}}
    splitting.check_split_counts(ok, ["a", "b"], plan, totals)
    with pytest.raises(splitting.DatasetContentError, match=r"no train example is tagged \['b'\]"):
        splitting.check_split_counts({**ok, "train": {0: 3}}, ["a", "b"], plan, totals)
    with pytest.raises(splitting.DatasetContentError, match=r"test split, \['a', 'b'\] tag no example or every"):
        splitting.check_split_counts({**ok, "test": {1: 4}}, ["a", "b"], plan, totals)
