"""What a batch scoring job refuses before reading a row, and how it names its files."""

import json

import pytest

from components.scorer.config import ScoringConfig
from components.scorer.records import BatchJob
from components.scorer.rows import BatchInputError, file_format, input_columns, output_format


def test_formats_come_from_the_extension_and_a_folder_must_be_a_saved_dataset(tmp_path):
    """The input paths training takes (components/example_gen/input_paths.py), compressions included."""
    names = ("a.jsonl", "b.json.gz", "c.CSV", "d.parquet", "e.tsv.bz2", "f.txt.xz", "g.arrow", "h.csv.zst")
    assert [file_format(n) for n in names] == ["jsonl", "jsonl", "csv", "parquet", "csv", "text", "arrow", "csv"]
    with pytest.raises(BatchInputError, match=r"unknown format '\.xlsx'"):
        file_format("rows.xlsx")
    with pytest.raises(BatchInputError, match="not a save_to_disk dataset"):
        file_format(str(tmp_path))
    (tmp_path / "state.json").write_text("{}")
    assert file_format(str(tmp_path)) == "dataset"
    (tmp_path / "dataset_dict.json").write_text('{"splits": ["train"]}')
    assert file_format(str(tmp_path)) == "dataset_dict"
    assert [output_format(n) for n in ("o.jsonl", "o.csv.gz", "o.parquet")] == ["jsonl", "csv", "parquet"]
    with pytest.raises(BatchInputError, match=r"unknown format '\.xlsx'"):
        output_format("o.xlsx")
    for unwritable in ("o.tsv", "o.txt", "o.arrow"):
        with pytest.raises(BatchInputError, match=r"name a \.jsonl, \.csv or \.parquet file"):
            output_format(unwritable)


def test_every_input_format_training_reads_is_read_into_rows(tmp_path):
    """TSV (compressed), text lines, arrow files and a DatasetDict folder (each row tagged with its split)."""
    import bz2

    import datasets

    (tmp_path / "rows.tsv.bz2").write_bytes(bz2.compress(b"id\ttext\n1\ta, fine film\n2\tdull\n"))
    assert input_columns(str(tmp_path / "rows.tsv.bz2"), "csv") == ["id", "text"]
    rows, bad = _read(str(tmp_path / "rows.tsv.bz2"), "csv", tmp_path)
    assert rows == [{"id": "1", "text": "a, fine film"}, {"id": "2", "text": "dull"}] and bad == []
    (tmp_path / "lines.txt").write_text("first text\nsecond text\n")
    assert input_columns(str(tmp_path / "lines.txt"), "text") == ["text"]
    assert _read(str(tmp_path / "lines.txt"), "text", tmp_path)[0] == [{"text": "first text"}, {"text": "second text"}]
    table = datasets.Dataset.from_dict({"id": [7, 8], "text": ["seven", "eight"]})
    table.save_to_disk(str(tmp_path / "one"))
    (arrow,) = (tmp_path / "one").glob("*.arrow")
    assert input_columns(str(arrow), "arrow") == ["id", "text"]
    assert sorted(r["id"] for r in _read(str(arrow), "arrow", tmp_path)[0]) == [7, 8]
    splits = datasets.DatasetDict({"train": table, "test": table.select([0])})
    splits.save_to_disk(str(tmp_path / "splits"))
    folder = str(tmp_path / "splits")
    assert file_format(folder) == "dataset_dict"
    assert input_columns(folder, "dataset_dict") == ["id", "text", "split"]
    read = sorted((r["split"], r["id"]) for r in _read(folder, "dataset_dict", tmp_path)[0])
    assert read == [("test", 7), ("train", 7), ("train", 8)]


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
    from components.scorer.job import plan_job

    with pytest.raises(BatchInputError, match="give serving/<name> after a push"):
        plan_job(BatchJob(model=str(tmp_path / "nothing"), input="in.csv", output="out.csv"))
    with pytest.raises(BatchInputError, match="--batch-size must be at least 1"):
        plan_job(BatchJob(model=str(tmp_path), input="in.csv", output="out.csv", batch_size=0))


def _read(path: str, kind: str, scratch) -> tuple[list, list]:
    """(rows, bad rows) read_rows gives, written out by the pipeline (its functions run pickled, elsewhere)."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from components.local_beam import LOCAL_BEAM_RUNNER
    from components.scorer.rows import read_rows

    with beam.Pipeline(options=PipelineOptions([f"--runner={LOCAL_BEAM_RUNNER}"])) as pipeline:
        rows, bad = read_rows(pipeline, BatchJob(model="m", input=path, output="o.jsonl"), kind)
        for name, found in (("rows", rows), ("bad", bad)):
            lines = found | f"{name}Json" >> beam.Map(json.dumps)
            lines | f"{name}Write" >> beam.io.WriteToText(str(scratch / name), shard_name_template="")
    return tuple([json.loads(line) for line in (scratch / n).read_text().splitlines()] for n in ("rows", "bad"))


def test_poison_rows_go_aside_with_their_reason_and_the_rest_is_read(tmp_path):
    """A field over the csv module's limit and a line that is not UTF-8 used to stop the whole job."""
    from components.scorer.rows import MAX_FIELD_CHARS

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


POISON_FIELD = "x" * 10_000_000  # a 10 MB field


def test_poison_rows_of_every_format_are_set_aside_and_every_good_row_is_read(tmp_path):
    """Half a character (JSON's lone surrogate), a quote never closed and a 10 MB field, in JSON lines, CSV and
    parquet: each set aside with its reason, every good row around them read, and no row held whole past the
    record bound (the unclosed quote loses its own line only)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    good = [{"id": str(i), "text": f"a fine film take {i}"} for i in range(6)]
    lines = [json.dumps(r) for r in good[:3]]
    lines += ['{"id": "s", "text": "half an emoji \\ud83d"}', json.dumps({"id": "big", "text": POISON_FIELD})]
    lines += [json.dumps(r) for r in good[3:]]
    (tmp_path / "rows.jsonl").write_text("\n".join(lines) + "\n")
    rows, bad = _read(str(tmp_path / "rows.jsonl"), "jsonl", tmp_path)
    assert sorted(r["id"] for r in rows) == [r["id"] for r in good]
    assert sorted(b["reason"] for b in bad) == [
        "field 'text' has 10,000,000 characters, over the 131,072 a row may hold",
        "field 'text' holds half a character (a lone surrogate) at position 14",
    ]

    records = ["id,text", *(f"{r['id']},{r['text']}" for r in good[:2]), 'q,"a quote never closed']
    records += [f"{r['id']},{r['text']}" for r in good[2:4]] + [f'big,"{POISON_FIELD}"']
    records += [f"{r['id']},{r['text']}" for r in good[4:]] + ["w,too,many,fields"]
    (tmp_path / "rows.csv").write_text("\n".join(records) + "\n")
    rows, bad = _read(str(tmp_path / "rows.csv"), "csv", tmp_path)
    assert sorted(r["id"] for r in rows) == [r["id"] for r in good]
    reasons = sorted(b["reason"] for b in bad)
    assert reasons == [
        "4 fields where the header has 2",
        "a line of over 1,048,576 characters",
        "a record still open after 1,048,576 characters (a quote never closed?)",  # its own line alone is lost
    ]
    assert {b["row"] for b in bad if "still open" in b["reason"]} == {'q,"a quote never closed\n'}

    table = pa.table({"id": [r["id"] for r in good] + ["big"], "text": [r["text"] for r in good] + [POISON_FIELD]})
    pq.write_table(table, tmp_path / "rows.parquet")
    rows, bad = _read(str(tmp_path / "rows.parquet"), "parquet", tmp_path)
    assert sorted(r["id"] for r in rows) == [r["id"] for r in good]
    assert [b["reason"] for b in bad] == ["field 'text' has 10,000,000 characters, over the 131,072 a row may hold"]


def test_a_quote_never_closed_mid_file_loses_its_own_line_only(tmp_path):
    from components.scorer.rows import MAX_RECORD_CHARS, csv_records

    filler = [f"{i},row {i}\n" for i in range(MAX_RECORD_CHARS // 8)]  # more than one record may hold
    lines = ["id,text\n", '1,"opens and never closes\n', *filler]
    read = list(csv_records(iter(lines), ","))
    assert read[1] == ('1,"opens and never closes\n', read[1][1]) and "still open after" in read[1][1]
    assert [fields for fields, problem in read if problem is None] == [
        ["id", "text"],
        *([line.split(",")[0], line.split(",")[1].strip()] for line in filler),
    ]


@pytest.mark.parametrize("kind", ["jsonl", "csv", "parquet"])
def test_parts_are_appended_into_one_file_with_one_header(tmp_path, kind):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from components.scorer.rows import merge_parts, parts_prefix

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
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"scored.{kind}"]  # the parts gone, no temporary left
