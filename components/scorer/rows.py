"""Rows in and out of a scoring job, as streams so memory does not grow with the rows: JSON lines, CSV, parquet,
text, arrow and save_to_disk folders in; JSON lines, CSV and parquet out, written in parts and appended into one
file under a temporary name renamed at the end (parts a cut-off run left are cleared first).

One bad row never stops the job: lines that are not UTF-8, half characters (JSON's lone surrogates), JSON that
does not parse, CSV records a quote leaves open, fields over MAX_FIELD_CHARS in any format are set aside with
their reason.
"""

from __future__ import annotations

import contextlib
import csv
import io
import itertools
import json
import os
import re
from collections.abc import Sequence
from typing import Any

from components.example_gen import input_paths
from components.scorer.records import BatchJob, ScoringPlan
from models.errors import UserError

# How a job reads each file format of input_paths (by its `datasets` builder), and what it writes.
READERS = {"json": "jsonl", "csv": "csv", "parquet": "parquet", "text": "text", "arrow": "arrow"}
OUTPUT_KINDS = ("jsonl", "csv", "parquet")
SPLIT_COLUMN = "split"  # added to the rows of a DatasetDict folder: which of its splits a row came from
# The csv module's own default field limit: a longer text is no classification input (the model reads its
# first max_seq_length tokens), and a row holding one is set aside rather than stopping the job.
MAX_FIELD_CHARS = 131_072
# The most a CSV record or a line of one is read into memory: past it, the record is set aside unparsed (a quote
# never closed would otherwise read the rest of the file into one field).
MAX_RECORD_CHARS = 8 * MAX_FIELD_CHARS
_NOT_UTF8 = re.compile("[\udc80-\udcff]")  # what errors="surrogateescape" decodes undecodable bytes to
_SURROGATE = re.compile("[\ud800-\udfff]")  # half a character: JSON's "\ud83d" decodes to one; no encoding holds it


class BatchInputError(UserError, ValueError):
    """The input or output cannot be used as given; the message says why and what would work."""


def file_format(path: str) -> str:
    """How a job reads a path (input_paths decides what it is): a save_to_disk folder's kind, or its format's reader."""
    if _local_folder(path):
        saved = input_paths.saved_kind(path)
        if saved is None:
            raise BatchInputError(
                f"{path} is a folder but not a save_to_disk dataset; give a file, a glob or such a folder"
            )
        return saved
    found = input_paths.file_format(path)
    if found is None:
        suffix = os.path.splitext(input_paths.uncompressed_name(path))[1]
        known = sorted(input_paths.FORMATS)
        raise BatchInputError(f"{path}: unknown format '{suffix}'; use one of {known} or a dataset folder")
    return READERS[found.builder]


def output_format(path: str) -> str:
    """The format a job writes `path` in; refused before anything is read when it writes no such file."""
    kind = file_format(path)  # an extension no reader knows is refused as an input's is, naming the formats
    if kind not in OUTPUT_KINDS or csv_delimiter(path) != ",":
        raise BatchInputError(f"--output {path}: name a .jsonl, .csv or .parquet file")
    return kind


def csv_delimiter(path: str) -> str:
    """A delimited file's separator: a tab for .tsv, else a comma."""
    found = input_paths.file_format(path)
    return found.options.get("delimiter", ",") if found else ","


def input_kind(source: str) -> str:
    """The format of a folder (a save_to_disk dataset) or of a pattern's first file."""
    return file_format(source if _local_folder(source) else matched_files(source)[0])


def _local_folder(path: str) -> bool:
    return "://" not in path and os.path.isdir(os.path.expanduser(path))


def missing_columns(columns: Sequence[str], wanted: set[str]) -> list[str]:
    """The wanted text columns the input lacks (none when its columns cannot be read ahead)."""
    return sorted(wanted - {""} - set(columns)) if columns else []


def matched_files(pattern: str) -> list[str]:
    files = input_paths.matched_files(pattern)
    if not files:
        raise BatchInputError(f"--input {pattern} matches no file")
    return files


def input_columns(source: str, kind: str) -> list[str]:
    """The input's column names, from its first file's header, schema or first row."""
    if kind in ("dataset", "dataset_dict"):
        import datasets

        loaded = datasets.load_from_disk(source)
        if kind == "dataset_dict":
            return [*next(iter(loaded.values())).column_names, SPLIT_COLUMN]
        return list(loaded.column_names)
    if kind == "text":
        return ["text"]  # one text per line, as the `datasets` text builder names it
    first = matched_files(source)[0]
    if kind == "parquet":
        import pyarrow.parquet as pq

        return list(pq.read_schema(first).names)
    if kind == "arrow":
        with _arrow_stream(first) as stream:
            return list(stream.schema.names)
    with open_text(first) as handle:
        if kind == "csv":
            return next(csv.reader(handle, delimiter=csv_delimiter(first)), [])
        for line in handle:
            if line.strip():
                try:
                    return list(json.loads(line))
                except (json.JSONDecodeError, TypeError):
                    return []
    return []


def open_text(path: str):
    """A text stream of a local or gs:// file, decompressed on the fly by its name (Beam's filesystems)."""
    from apache_beam.io.filesystems import FileSystems

    return io.TextIOWrapper(io.BufferedReader(_RawReader(FileSystems.open(path))), encoding="utf-8", newline="")


class _RawReader(io.RawIOBase):
    """A Beam file as the raw stream io.TextIOWrapper reads: Beam's compressed files lack that interface."""

    def __init__(self, handle):
        self.handle = handle

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.handle.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self.handle.close()
        super().close()


def row_problem(row: dict) -> str | None:
    """Why a parsed row cannot be scored as read: bytes that were not UTF-8, half a character (a lone
    surrogate), or a field over the limit. Asked of every format's rows (parquet's, arrow's and saved
    datasets' too), so no such row reaches a model call shared with good ones."""
    for column, value in row.items():
        if not isinstance(value, str):
            continue
        if len(value) > MAX_FIELD_CHARS:
            return f"field '{column}' has {len(value):,} characters, over the {MAX_FIELD_CHARS:,} a row may hold"
        if _NOT_UTF8.search(value):
            return f"field '{column}' is not UTF-8 text"
        if lone := _SURROGATE.search(value):
            return f"field '{column}' holds half a character (a lone surrogate) at position {lone.start()}"
    return None


def _checked(row):
    problem = row_problem(row) if isinstance(row, dict) else None
    yield _bad(problem, row) if problem else row


def _bad(reason: str, row: Any):
    import apache_beam as beam

    from components.scorer.scoring import BAD

    def printable(value: Any) -> str:  # undecodable bytes and half characters shown as U+FFFD: the file is UTF-8
        return _SURROGATE.sub("\ufffd", str(value)[:1000])

    shown = {k: printable(v) for k, v in row.items()} if isinstance(row, dict) else printable(row)
    return beam.pvalue.TaggedOutput(BAD, {"reason": reason, "row": shown})


def _csv_rows(readable_file):
    """A CSV (or TSV) file's records as dicts, streamed (Python's csv reader: quoted newlines stay inside a
    field). A record the reader cannot finish (a quote never closed, a field past MAX_RECORD_CHARS, text after a
    closing quote), a line past MAX_RECORD_CHARS and a record wider than the header are bad rows;
    reading goes on at the line after the one the bad record began on, so one stray quote loses one row."""
    delimiter = csv_delimiter(readable_file.metadata.path)
    stream = io.BufferedReader(_RawReader(readable_file.open()))
    with io.TextIOWrapper(stream, encoding="utf-8", errors="surrogateescape", newline="") as handle:
        header = None
        for fields, problem in csv_records(_bounded_lines(handle), delimiter):
            if problem is not None:
                yield _bad(problem, fields)
            elif header is None:
                header = fields
            elif len(fields) > len(header):
                yield _bad(f"{len(fields)} fields where the header has {len(header)}", fields)
            else:  # a short record's missing fields are None, as csv.DictReader reads them
                yield from _checked(dict(itertools.zip_longest(header, fields)))


class _LongLine(str):
    """The first characters of a line longer than MAX_RECORD_CHARS (its rest was read and dropped)."""


def _bounded_lines(handle, limit: int = MAX_RECORD_CHARS):
    """The lines of a text stream, none held longer than `limit` characters: a longer one is a _LongLine."""
    while line := handle.readline(limit):
        if len(line) == limit and not line.endswith("\n"):
            while (rest := handle.readline(limit)) and not rest.endswith("\n"):
                pass
            yield _LongLine(line[:1000])
        else:
            yield line


class _RecordTooLong(UserError, csv.Error):
    """A CSV record still open past MAX_RECORD_CHARS: set aside like any record the reader refuses."""


def csv_records(lines, delimiter: str):
    """(fields, None) per record of `lines`, or (the line a bad record began on, the reason) where the csv
    reader (strict: a quote must close, and be followed by a delimiter) fails; the lines that record had read
    after its first are read again. Hand-written around the csv module because its reader stops at the first
    error, and without a bound one unclosed quote reads the rest of a file into a single field."""
    import collections

    again: collections.deque[str] = collections.deque()
    taken: list[str] = []  # the lines the record being read has taken
    taken_chars = 0

    def source():
        nonlocal taken_chars
        while again or (line := next(lines, None)) is not None:
            line = again.popleft() if again else line
            if not taken:
                taken_chars = 0
            taken.append(line)
            taken_chars += len(line)
            if isinstance(line, _LongLine) or taken_chars > MAX_RECORD_CHARS:
                raise _RecordTooLong
            yield line

    csv.field_size_limit(MAX_RECORD_CHARS)  # process-wide; no record this reader keeps is longer
    while True:
        try:
            for fields in csv.reader(source(), delimiter=delimiter, strict=True):
                taken.clear()
                if fields:  # a blank line is no record
                    yield fields, None
            return
        except csv.Error as error:  # _RecordTooLong too
            first, rest = taken[0], taken[1:]
            taken.clear()
            again.extendleft(reversed(rest))
            if isinstance(first, _LongLine):
                reason = f"a line of over {MAX_RECORD_CHARS:,} characters"
            elif isinstance(error, _RecordTooLong):
                reason = f"a record still open after {MAX_RECORD_CHARS:,} characters (a quote never closed?)"
            else:
                reason = f"not a CSV record: {error} (a quote never closed?)"
            yield first, reason


def _json_line(line: bytes):
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as error:
        yield _bad(f"line is not UTF-8 text ({error.reason} at byte {error.start})", line.decode("utf-8", "replace"))
        return
    try:
        row = json.loads(text)
    except json.JSONDecodeError as error:
        yield _bad(f"not JSON: {error}", text)
    except RecursionError:
        yield _bad("not JSON this reader takes: arrays or objects nested too deeply", text)
    else:
        yield from _checked(row)


def _text_line(line: bytes):
    """A line of a text file is one row's text, as the `datasets` text builder reads it."""
    yield from _checked({"text": line.decode("utf-8", "surrogateescape")})


def _arrow_rows(path: str):
    """The rows of an arrow file as `datasets` writes them (Arrow's IPC stream format), batch by batch."""
    with _arrow_stream(path) as stream:
        for batch in stream:
            yield from batch.to_pylist()


@contextlib.contextmanager
def _arrow_stream(path: str):
    """An arrow file's IPC stream, local or gs:// (Beam's filesystems, as the other formats are read)."""
    import pyarrow as pa
    from apache_beam.io.filesystems import FileSystems

    with FileSystems.open(path) as handle:
        yield pa.ipc.open_stream(handle)


def _dataset_shard(index: int, folder: str, shards: int):
    """Shard `index` of a save_to_disk folder's rows; a DatasetDict's rows carry the split they came from."""
    import datasets

    loaded = datasets.load_from_disk(folder)
    if isinstance(loaded, datasets.DatasetDict):
        for split, rows in loaded.items():
            for row in _shard(rows, index, shards):
                yield {**row, SPLIT_COLUMN: split}
        return
    yield from _shard(loaded, index, shards)


def _shard(rows, index: int, shards: int):
    """Shard `index` of `shards` contiguous parts; a table of fewer rows than shards is one row per shard."""
    if index < len(rows):
        yield from rows.shard(min(shards, len(rows)), index, contiguous=True)


def read_rows(pipeline, job: BatchJob, kind: str):
    """(rows, unreadable rows) of the input. Each reader checks its rows' fields (row_problem) in the step that
    parses them: a text with an undecodable byte cannot even pass to the next step (Beam encodes it as UTF-8)."""
    import apache_beam as beam

    from components.scorer.scoring import BAD

    rows, unreadable = _parsed_rows(pipeline, job, kind)
    if kind in ("jsonl", "csv", "text"):
        return rows, unreadable
    checked = rows | "CheckFields" >> beam.FlatMap(_checked).with_outputs(BAD, main="rows")
    return checked.rows, checked[BAD]


def _parsed_rows(pipeline, job: BatchJob, kind: str):
    """(rows, rows that could not be parsed or hold a field row_problem refuses) of the input, in its format;
    parquet, arrow and saved datasets' rows unchecked (Arrow holds only UTF-8: they pass between steps)."""
    import apache_beam as beam
    from apache_beam.io import fileio

    from components.scorer.scoring import BAD

    if kind == "jsonl":
        parsed = (
            pipeline
            | "ReadLines" >> beam.io.ReadFromText(job.input, coder=beam.coders.BytesCoder())  # decoded per line
            | "ParseJson" >> beam.FlatMap(_json_line).with_outputs(BAD, main="rows")
        )
        return parsed.rows, parsed[BAD]
    if kind == "csv":
        parsed = (
            pipeline
            | "MatchFiles" >> fileio.MatchFiles(job.input)
            | "ReadMatches" >> fileio.ReadMatches()
            | "ReadCsv" >> beam.FlatMap(_csv_rows).with_outputs(BAD, main="rows")
        )
        return parsed.rows, parsed[BAD]
    if kind == "text":
        parsed = (
            pipeline
            | "ReadLines" >> beam.io.ReadFromText(job.input, coder=beam.coders.BytesCoder())
            | "LineToRow" >> beam.FlatMap(_text_line).with_outputs(BAD, main="rows")
        )
        return parsed.rows, parsed[BAD]
    if kind == "parquet":
        rows = pipeline | "ReadParquet" >> beam.io.ReadFromParquet(job.input)
    elif kind == "arrow":
        rows = (
            pipeline | "ArrowFiles" >> beam.Create(matched_files(job.input)) | "ReadArrow" >> beam.FlatMap(_arrow_rows)
        )
    else:
        shards = max(1, os.cpu_count() or 1) * 4
        rows = (
            pipeline
            | "Shards" >> beam.Create(range(shards))
            | "ReadDataset" >> beam.FlatMap(_dataset_shard, job.input, shards)
        )
    return rows, pipeline | "NoUnreadableRows" >> beam.Create([])


def parts_prefix(path: str) -> str:
    """Where the pipeline writes a file's parts before they are appended into it."""
    return f"{path}.parts/part"


def write_rows(rows, job: BatchJob, plan: ScoringPlan):
    """The scored rows into parts of job.output, in its format, as bundles finish (merge_parts joins them)."""
    import apache_beam as beam

    from components.scorer.scoring import to_json_line

    kind = output_format(job.output)
    if kind == "jsonl":
        lines = rows | "WriteJson" >> beam.Map(to_json_line)
        return lines | "WriteJsonParts" >> beam.io.WriteToText(parts_prefix(job.output))
    if kind == "csv":
        columns = plan.columns
        lines = rows | "ToCsv" >> beam.Map(lambda row: csv_line([row.get(c) for c in columns]))
        return lines | "WriteCsvParts" >> beam.io.WriteToText(parts_prefix(job.output))
    schema = _parquet_schema(job, plan)
    return rows | "WriteParquetParts" >> beam.io.WriteToParquet(parts_prefix(job.output), schema)


def merge_parts(path: str, kind: str, header: str = "") -> None:
    """Appends the parts written for `path` into it, a chunk or a row group at a time, then removes them. The
    file is written under a temporary name and renamed, so a job cut off while merging leaves no half file
    where a finished one was. A `.gz` path is compressed as it is written (its name says so)."""
    from apache_beam.io.filesystems import CompressionTypes, FileSystems

    found = FileSystems.match([parts_prefix(path) + "*"])[0].metadata_list
    parts = sorted(m.path for m in found)
    folder, name = os.path.split(path)
    unfinished = FileSystems.join(folder, f".{name}.unfinished") if folder else f".{name}.unfinished"
    compression = CompressionTypes.detect_compression_type(path)
    if kind == "parquet":
        import pyarrow.parquet as pq

        schema = pq.ParquetFile(FileSystems.open(parts[0])).schema_arrow if parts else None
        with FileSystems.create(unfinished) as sink, pq.ParquetWriter(sink, schema) as writer:
            for part in parts:
                for batch in pq.ParquetFile(FileSystems.open(part)).iter_batches():
                    writer.write_batch(batch)
    else:
        with FileSystems.create(unfinished, compression_type=compression) as sink:
            sink.write(header.encode())
            for part in parts:
                with FileSystems.open(part) as source:
                    while chunk := source.read(1 << 20):
                        sink.write(chunk)
    FileSystems.rename([unfinished], [path])  # replaces an earlier run's file: a rename locally, a copy on gs://
    if parts:
        FileSystems.delete([path + ".parts"])


def clear_parts(path: str) -> None:
    """Removes parts an earlier run of the same output left (cut off before merging): merged, they would add
    that run's rows to this one's."""
    from apache_beam.io.filesystems import FileSystems

    stale = FileSystems.match([parts_prefix(path) + "*"])[0].metadata_list
    if stale:
        FileSystems.delete([m.path for m in stale])


def csv_line(values) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="").writerow(["" if v is None else v for v in values])
    return buffer.getvalue()


def _parquet_schema(job: BatchJob, plan: ScoringPlan):
    """Id columns keep their input types where the input declares them (parquet); strings otherwise. The
    answer: the label(s) a string, the score and each probability a float."""
    import pyarrow as pa

    declared = {}
    if plan.input_kind == "parquet":
        import pyarrow.parquet as pq

        schema = pq.read_schema(matched_files(job.input)[0])
        declared = {name: schema.field(name).type for name in schema.names}
    label_column, *number_columns = plan.columns[len(plan.scoring.ids) :]
    return pa.schema(
        [
            *(pa.field(column, declared.get(column, pa.string())) for column in plan.scoring.ids),
            pa.field(label_column, pa.string()),
            *(pa.field(column, pa.float64()) for column in number_columns),
        ]
    )
