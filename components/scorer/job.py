"""A batch scoring job: a file, a glob or a save_to_disk dataset scored by a pushed model into one file.

A Beam pipeline (components/scorer/scoring.py does the scoring): read rows -> set aside rows without a usable
text -> RunInference -> write the id columns and the answer. JSON lines, CSV and parquet in and out, read and
written as streams, so memory does not grow with the rows: the pipeline writes the output in parts, as its
bundles finish (one output file would make Beam group every row under one key first, which the local runner
holds in memory), and the parts are then appended into the one file, chunk by chunk, under a temporary name
renamed at the end (parts a cut-off run left are cleared first). One bad row never stops the job: lines that
are not UTF-8, half characters (JSON's lone surrogates), JSON that does not parse, CSV records a quote leaves
open, fields over MAX_FIELD_CHARS in any format go to the bad-rows file with their reason. Run by
`hftfx predict --input` (its own Beam pipeline: the local runner, or Dataflow through beam_args) and by the
pipeline's BatchScorer (the component's Beam pipeline, so the profile's runner).
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import itertools
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from typing import Any

from components.example_gen import input_paths
from models.errors import UserError

# How a job reads each file format of input_paths (by its `datasets` builder), and what it writes.
READERS = {"json": "jsonl", "csv": "csv", "parquet": "parquet", "text": "text", "arrow": "arrow"}
OUTPUT_KINDS = ("jsonl", "csv", "parquet")
SPLIT_COLUMN = "split"  # added to the rows of a DatasetDict folder: which of its splits a row came from
# Rows per serving_default call. It runs a call's rows shortest first in chunks of 32, each as wide as its
# longest text: the more rows per call, the less padding. 1024 scored 1.15x the rows/s of 256 on MiniLM-L6.
DEFAULT_BATCH_SIZE = 1024


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


@dataclasses.dataclass(frozen=True)
class BatchJob:
    model: str  # serving/<name> (the newest version) or a version folder
    input: str  # a file, a glob, or a save_to_disk folder
    output: str  # .jsonl, .csv or .parquet: one file
    text_column: str = "text"
    text_pair_column: str = ""
    id_columns: tuple[str, ...] | None = None  # None: every input column but the texts
    batch_size: int = DEFAULT_BATCH_SIZE
    beam_args: tuple[str, ...] = ()
    progress_every: int = 10_000

    @property
    def bad_rows_path(self) -> str:
        stem, _ = os.path.splitext(self.output)
        return f"{stem}.bad.jsonl"


@dataclasses.dataclass
class BatchSummary:
    rows: int
    bad_rows: int
    seconds: float
    label_counts: dict[str, int]
    output: str
    bad_rows_path: str

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0

    def render(self) -> str:
        total = sum(self.label_counts.values()) or 1
        labels = ", ".join(f"{name} {n:,} ({n / total:.1%})" for name, n in self.label_counts.items())
        return "\n".join(
            [
                f"scored        {self.rows:,} rows in {self.seconds:.1f} s ({self.rows_per_second:,.0f} rows/s)",
                f"labels        {labels or 'none'}",
                f"output        {self.output}",
                f"bad rows      {self.bad_rows:,}" + (f" written to {self.bad_rows_path}" if self.bad_rows else ""),
            ]
        )


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
    with _open_text(first) as handle:
        if kind == "csv":
            return next(csv.reader(handle, delimiter=csv_delimiter(first)), [])
        for line in handle:
            if line.strip():
                try:
                    return list(json.loads(line))
                except (json.JSONDecodeError, TypeError):
                    return []
    return []


def _open_text(path: str):
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
        lines = rows | "ToCsv" >> beam.Map(lambda row: _csv_line([row.get(c) for c in columns]))
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


def _csv_line(values) -> str:
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


@dataclasses.dataclass(frozen=True)
class ScoringPlan:
    """What a job will do, decided before any row is read: the model, its task, the formats and columns."""

    model_dir: str
    contract: Any  # models.task.TaskContract
    input_kind: str
    columns: tuple[str, ...]  # the output's, in order
    scoring: Any  # components.scorer.scoring.ScoringColumns

    @property
    def multi_label(self) -> bool:
        from models.task import MULTI_LABEL

        return self.contract.task == MULTI_LABEL


def plan_job(job: BatchJob) -> ScoringPlan:
    """Every check that needs no row read: the model's contract, the pair column, formats, the text columns."""
    from components.scorer.scoring import ScoringColumns, output_columns
    from models.serving.pushed_model import resolve_version_dir
    from models.task import MULTI_LABEL, read_contract

    if job.batch_size < 1:
        raise BatchInputError(f"--batch-size must be at least 1, not {job.batch_size}")
    try:
        model_dir = job.model if "://" in job.model else str(resolve_version_dir(job.model))
    except FileNotFoundError as error:
        raise BatchInputError(f"--model: {error}; give serving/<name> after a push, or a version folder") from error
    contract = read_contract(model_dir)
    if contract is None:
        raise BatchInputError(f"{model_dir} carries no task contract: push it again with this version of hftfx")
    pair_model = len(contract.text_inputs) == 2
    if pair_model and not job.text_pair_column:
        raise BatchInputError(f"{model_dir} is a sentence-pair model: name the second text with --text-pair-column")
    if job.text_pair_column and not pair_model:
        raise BatchInputError(f"{model_dir} reads one text: drop --text-pair-column {job.text_pair_column}")
    kind = input_kind(job.input)
    output_format(job.output)  # an output it cannot write stops here, before anything is read
    columns_in = input_columns(job.input, kind)
    texts = {job.text_column, job.text_pair_column} - {""}
    missing = missing_columns(columns_in, texts)
    if missing:
        raise BatchInputError(f"the input has no column {missing}; its columns: {columns_in} (see --text-column)")
    ids = tuple(job.id_columns) if job.id_columns is not None else tuple(c for c in columns_in if c not in texts)
    columns = (*ids, *output_columns(contract.label_names, contract.task == MULTI_LABEL))
    return ScoringPlan(model_dir, contract, kind, columns, ScoringColumns(job.text_column, job.text_pair_column, ids))


def add_scoring(pipeline, job: BatchJob, plan: ScoringPlan) -> None:
    """Adds read -> score -> write (and the bad rows aside) to a Beam pipeline."""
    import apache_beam as beam

    from components.scorer.scoring import BAD, ScoreRows, to_json_line

    clear_parts(job.output)
    clear_parts(job.bad_rows_path)
    rows, unreadable = read_rows(pipeline, job, plan.input_kind)
    scored = rows | "Score" >> ScoreRows(
        plan.model_dir, plan.scoring, plan.contract.label_names, plan.multi_label, job.batch_size, job.progress_every
    )
    write_rows(scored["scored"], job, plan)
    bad = (unreadable, scored[BAD]) | "AllBadRows" >> beam.Flatten()
    (
        bad
        | "BadToJson" >> beam.Map(to_json_line)
        | "WriteBadRowParts" >> beam.io.WriteToText(parts_prefix(job.bad_rows_path))
    )


def job_summary(result, job: BatchJob, plan: ScoringPlan, seconds: float) -> BatchSummary:
    """The finished pipeline's parts joined into the output and bad-rows files, and its counters as a summary;
    an empty bad-rows file is removed."""
    from apache_beam.metrics.metric import MetricsFilter

    from components.scorer.scoring import LABEL_COUNTER_PREFIX, METRICS_NAMESPACE

    kind = output_format(job.output)
    merge_parts(job.output, kind, _csv_line(plan.columns) + "\n" if kind == "csv" else "")
    merge_parts(job.bad_rows_path, "jsonl")
    counters = {
        r.key.metric.name: r.committed
        for r in result.metrics().query(MetricsFilter().with_namespace(METRICS_NAMESPACE))["counters"]
    }
    labels = {name: counters.get(LABEL_COUNTER_PREFIX + name, 0) for name in plan.contract.label_names}
    bad_count = _count_lines(job.bad_rows_path)
    if not bad_count:
        _remove(job.bad_rows_path)  # no bad rows: no empty file beside the output
    return BatchSummary(counters.get("num_inferences", 0), bad_count, seconds, labels, job.output, job.bad_rows_path)


def run_batch_prediction(job: BatchJob, default_beam_args: Sequence[str] = (), stream=sys.stdout) -> BatchSummary:
    """The job in a Beam pipeline of its own: job.beam_args, else `default_beam_args`."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    plan = plan_job(job)
    print(
        f"[predict] model {plan.model_dir} ({plan.contract.describe()}); input {job.input} ({plan.input_kind})",
        file=stream,
        flush=True,
    )
    started = time.monotonic()
    with beam.Pipeline(options=PipelineOptions(list(job.beam_args or default_beam_args))) as pipeline:
        add_scoring(pipeline, job, plan)
    return job_summary(pipeline.result, job, plan, time.monotonic() - started)


def _count_lines(path: str) -> int:
    from apache_beam.io.filesystems import FileSystems

    if not FileSystems.exists(path):
        return 0
    with _open_text(path) as handle:
        return sum(1 for line in handle if line.strip())


def _remove(path: str) -> None:
    from apache_beam.io.filesystems import FileSystems

    if FileSystems.exists(path):
        FileSystems.delete([path])
