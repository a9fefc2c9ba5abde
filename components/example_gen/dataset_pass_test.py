"""The one pass over a dataset, as its four readers run it: a bounded sample, every row, or no row here (the
ExampleGen's executor). Real CSV files through the real readers; the distinct-values pass is a stand-in that
counts its calls (it is one Beam pass over the label column where it runs for real)."""

import csv
import json

import pytest

from components.example_gen.config import DatasetConfig
from components.example_gen.dataset_pass import EVERY_ROW, RowBudget, dataset_pass
from components.example_gen.splitting import DatasetContentError


def _csv(path, rows):
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        writer.writerows(rows)
    return str(path)


def _reviews(count: int) -> list[tuple[str, str]]:
    return [(f"review number {i}, {'moving' if i % 2 else 'dull'}", "pos" if i % 2 else "neg") for i in range(count)]


def _config(path, **values) -> DatasetConfig:
    return DatasetConfig(name="csv", data_files=(path,), **values)


class DistinctPass:
    """The label column's distinct values, as the Beam pass gives them; counts how often it is asked."""

    def __init__(self, values):
        self.values, self.calls = values, 0

    def __call__(self, read):
        self.calls += 1
        return self.values


def test_a_sample_that_holds_every_row_places_them_all_and_finds_the_labels_itself(tmp_path):
    beam = DistinctPass(["neg", "pos"])
    found = dataset_pass(_config(_csv(tmp_path / "a.csv", _reviews(400))), RowBudget(1000, None), beam)
    assert found.complete and found.rows_read == 400 and beam.calls == 0
    assert found.label_names == ["neg", "pos"]
    assert sum(found.placed.totals().values()) == 400 and set(found.placed.totals()) == {"train", "eval", "test"}
    assert all(len(counts) == 2 for counts in found.placed.label_counts().values())  # both classes in each split


def test_a_sample_short_of_the_data_asks_the_distinct_values_pass_for_the_label_set(tmp_path):
    beam = DistinctPass(["neg", "pos", "mixed"])  # a label the first rows do not hold
    found = dataset_pass(_config(_csv(tmp_path / "a.csv", _reviews(400))), RowBudget(50, None), beam)
    assert not found.complete and found.rows_read == 50 and beam.calls == 1
    assert found.label_names == ["mixed", "neg", "pos"]


def test_the_executors_pass_reads_no_row_here(tmp_path):
    beam = DistinctPass(["neg", "pos"])
    found = dataset_pass(_config(_csv(tmp_path / "a.csv", _reviews(40))), None, beam)
    assert found.placed is None and not found.complete and found.rows_read == 0
    assert found.label_names == ["neg", "pos"] and beam.calls == 1


def test_declared_labels_need_no_pass_and_keep_their_order(tmp_path):
    beam = DistinctPass(["neg", "pos"])
    config = _config(_csv(tmp_path / "a.csv", _reviews(40)), label_names=("pos", "neg"))
    found = dataset_pass(config, None, beam)
    assert found.label_names == ["pos", "neg"] and beam.calls == 0


def test_every_row_read_runs_the_split_checks(tmp_path):
    """One positive review in 300: some split holds one class only, which its metrics cannot take; the pass says
    so before any example is written, as the ExampleGen would after writing them."""
    rows = [(f"a dull review {i}", "neg") for i in range(299)] + [("one moving review", "pos")]
    with pytest.raises(DatasetContentError, match="split"):
        dataset_pass(_config(_csv(tmp_path / "a.csv", rows)), EVERY_ROW)


def test_lists_in_the_label_column_make_the_task_multi_label(tmp_path):
    path = tmp_path / "tags.jsonl"
    tags = [["a"], ["b"], ["a", "b"]]
    path.write_text("".join(json.dumps({"text": f"film {i}", "label": tags[i % 3]}) + "\n" for i in range(60)))
    found = dataset_pass(DatasetConfig(name="json", data_files=(str(path),)), EVERY_ROW)
    assert found.read.config.multi_label and found.label_names == ["a", "b"]
