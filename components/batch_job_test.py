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


def _read(path: str, kind: str, scratch) -> tuple[list, list]:
    """(rows, bad rows) read_rows gives, written out by the pipeline (its functions run pickled, elsewhere)."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from components.batch_job import read_rows

    with beam.Pipeline(options=PipelineOptions(["--runner=FnApiRunner"])) as pipeline:
        rows, bad = read_rows(pipeline, BatchJob(model="m", input=path, output="o.jsonl"), kind)
        for name, found in (("rows", rows), ("bad", bad)):
            lines = found | f"{name}Json" >> beam.Map(json.dumps)
            lines | f"{name}Write" >> beam.io.WriteToText(str(scratch / name), shard_name_template="")
    return tuple([json.loads(line) for line in (scratch / n).read_text().splitlines()] for n in ("rows", "bad"))


def test_poison_rows_go_aside_with_their_reason_and_the_rest_is_read(tmp_path):
    """A field over the csv module's limit and a line that is not UTF-8 used to stop the whole job."""
    from components.batch_job import MAX_FIELD_CHARS

    csv_file = tmp_path / "rows.csv"
    huge = "x" * (MAX_FIELD_CHARS + 1)
    csv_file.write_bytes(f'id,text\n1,fine\n2,"{huge}"\n3,caf\xe9 latin-1\n4,also fine\n'.encode("latin-1"))
    rows, bad = _read(str(csv_file), "csv", tmp_path)
    assert sorted(r["id"] for r in rows) == ["1", "4"]
    reasons = sorted(b["reason"] for b in bad)
    assert reasons == ["field 'text' has 131,073 characters, over the 131,072 a row may hold",
                       "field 'text' is not UTF-8 text"]  # fmt: skip
    lines = tmp_path / "rows.jsonl"
    lines.write_bytes(b'{"text": "ok"}\n{"text": "caf\xe9"}\n{oops\n' + json.dumps({"text": huge}).encode() + b"\n")
    rows, bad = _read(str(lines), "jsonl", tmp_path)
    assert rows == [{"text": "ok"}]
    assert sorted(b["reason"].split(" (")[0].split(":")[0] for b in bad) == [
        "field 'text' has 131,073 characters, over the 131,072 a row may hold",
        "line is not UTF-8 text",
        "not JSON",
    ]


@pytest.mark.parametrize("kind", ["jsonl", "csv", "parquet"])
def test_parts_are_appended_into_one_file_with_one_header(tmp_path, kind):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from components.batch_job import merge_parts, parts_prefix

    output = str(tmp_path / f"scored.{kind}")
    (tmp_path / f"scored.{kind}.parts").mkdir()
    for index, ids in enumerate((["a", "b"], ["c"])):
        part = f"{parts_prefix(output)}-{index:05d}-of-00002"
        if kind == "parquet":
            pq.write_table(pa.table({"id": ids}), part)
        else:
            (tmp_path / part).write_text("".join(f"{i}\n" for i in ids))
    merge_parts(output, kind, "id\n" if kind == "csv" else "")
    if kind == "parquet":
        assert pq.read_table(output).column("id").to_pylist() == ["a", "b", "c"]
    else:
        assert (tmp_path / f"scored.{kind}").read_text() == ("id\n" if kind == "csv" else "") + "a\nb\nc\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"scored.{kind}"]
