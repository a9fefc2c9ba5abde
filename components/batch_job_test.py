"""What a batch scoring job refuses before reading a row, and how it names its files."""

import json

import pytest

from components.batch_job import BatchInputError, BatchJob, ScoringConfig, file_format, input_columns


def test_formats_come_from_the_extension_and_a_folder_must_be_a_saved_dataset(tmp_path):
    assert [file_format(n) for n in ("a.jsonl", "b.json.gz", "c.CSV", "d.parquet")] == [
        "jsonl",
        "jsonl",
        "csv",
        "parquet",
    ]
    with pytest.raises(BatchInputError, match=r"unknown format '\.xlsx'"):
        file_format("rows.xlsx")
    with pytest.raises(BatchInputError, match="not a save_to_disk dataset"):
        file_format(str(tmp_path))
    (tmp_path / "state.json").write_text("{}")
    assert file_format(str(tmp_path)) == "dataset"


def test_columns_are_read_from_the_first_row_or_header(tmp_path):
    (tmp_path / "a.jsonl").write_text(json.dumps({"id": 1, "text": "x"}) + "\n")
    (tmp_path / "b.csv").write_text("id,review\n1,x\n")
    assert input_columns(str(tmp_path / "*.jsonl"), "jsonl") == ["id", "text"]
    assert input_columns(str(tmp_path / "b.csv"), "csv") == ["id", "review"]
    with pytest.raises(BatchInputError, match="matches no file"):
        input_columns(str(tmp_path / "*.parquet"), "parquet")


def test_the_pipelines_scoring_input_is_checked_against_the_task_before_training(tmp_path):
    rows = tmp_path / "rows.csv"
    rows.write_text("id,review\n1,x\n")
    ScoringConfig().check_input(pair_model=False)  # no input: nothing to check
    ScoringConfig(input=str(rows), text_column="review").check_input(pair_model=False)
    with pytest.raises(BatchInputError, match=r"no column \['text'\]; its columns: \['id', 'review'\]"):
        ScoringConfig(input=str(rows)).check_input(pair_model=False)
    with pytest.raises(BatchInputError, match=r"text pairs: set scoring\.text_pair_column"):
        ScoringConfig(input=str(rows), text_column="review").check_input(pair_model=True)


def test_bad_rows_go_beside_the_output():
    assert BatchJob(model="m", input="in.csv", output="out/scored.parquet").bad_rows_path == "out/scored.bad.jsonl"


def test_a_missing_model_or_a_zero_batch_is_refused_with_the_fix(tmp_path):
    from components.batch_job import plan_job

    with pytest.raises(BatchInputError, match="give serving/<name> after a push"):
        plan_job(BatchJob(model=str(tmp_path / "nothing"), input="in.csv", output="out.csv"))
    with pytest.raises(BatchInputError, match="--batch-size must be at least 1"):
        plan_job(BatchJob(model=str(tmp_path), input="in.csv", output="out.csv", batch_size=0))
