"""A batch scoring job: a file, a glob or a save_to_disk dataset scored by a pushed model into one file.

A Beam pipeline (components/scorer/scoring.py does the scoring): read rows -> set aside rows without a usable
text -> RunInference -> write the id columns and the answer, in parts as bundles finish (one output file would
make Beam group every row under one key first, which the local runner holds in memory); the parts are then
appended into the one file (rows.py reads and writes each format as a stream). Run by `hftfx predict --input`
(its own Beam pipeline: the local runner, or Dataflow through beam_args) and by the pipeline's BatchScorer (the
component's Beam pipeline, so the profile's runner)."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

from components.scorer.records import BatchJob, BatchSummary, ScoringPlan
from components.scorer.rows import (
    BatchInputError,
    clear_parts,
    csv_line,
    input_columns,
    input_kind,
    merge_parts,
    missing_columns,
    open_text,
    output_format,
    parts_prefix,
    read_rows,
    write_rows,
)


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

    from components.scorer.scoring import BAD, LOGGED, ScoreRows, ToLogLine, to_json_line

    clear_parts(job.output)
    clear_parts(job.bad_rows_path)
    rows, unreadable = read_rows(pipeline, job, plan.input_kind)
    log_line = None
    if job.log is not None:
        log_line = ToLogLine(
            plan.scoring, plan.contract.label_names, plan.multi_label, job.log, plan.version, plan.started
        )
    scored = rows | "Score" >> ScoreRows(
        plan.model_dir,
        plan.scoring,
        plan.contract.label_names,
        plan.multi_label,
        job.batch_size,
        job.progress_every,
        log_line,
        job.precision,
    )
    write_rows(scored["scored"], job, plan)
    if log_line is not None:
        from models.serving.prediction_log import batch_shard_prefix

        prefix = batch_shard_prefix(job.log.log_dir, plan.version, plan.started)
        scored[LOGGED] | "WriteLogShards" >> beam.io.WriteToText(prefix, file_name_suffix=".jsonl")
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

    from components.scorer.scoring import LABEL_COUNTER_PREFIX, LOGGED_COUNTER, METRICS_NAMESPACE

    kind = output_format(job.output)
    merge_parts(job.output, kind, csv_line(plan.columns) + "\n" if kind == "csv" else "")
    merge_parts(job.bad_rows_path, "jsonl")
    counters = {
        r.key.metric.name: r.committed
        for r in result.metrics().query(MetricsFilter().with_namespace(METRICS_NAMESPACE))["counters"]
    }
    labels = {name: counters.get(LABEL_COUNTER_PREFIX + name, 0) for name in plan.contract.label_names}
    bad_count = _count_lines(job.bad_rows_path)
    if not bad_count:
        _remove(job.bad_rows_path)  # no bad rows: no empty file beside the output
    summary = BatchSummary(counters.get("num_inferences", 0), bad_count, seconds, labels, job.output, job.bad_rows_path)
    if job.log is not None:
        summary.logged = f"{counters.get(LOGGED_COUNTER, 0):,} rows to {job.log.log_dir}/version={plan.version}"
        _keep_log_within_bounds(job.log)
    return summary


def _keep_log_within_bounds(log) -> None:
    """The log folder's size cap and retention, as a server keeps them (a local folder; a bucket's lifecycle
    rules keep a gs:// one)."""
    from pathlib import Path

    from models.hub.remote_folder import is_remote
    from models.serving.prediction_log import keep_within_bounds

    if not is_remote(log.log_dir):
        keep_within_bounds(Path(log.log_dir), log)


def run_batch_prediction(job: BatchJob, default_beam_args: Sequence[str] = (), stream=sys.stdout) -> BatchSummary:
    """The job in a Beam pipeline of its own: job.beam_args, else `default_beam_args`."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    plan = plan_job(job)
    print(
        f"[predict] model {plan.model_dir} ({plan.contract.describe()}"
        + (f", in {job.precision.describe()}" if job.precision else "")
        + f"); input {job.input} ({plan.input_kind})",
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
    with open_text(path) as handle:
        return sum(1 for line in handle if line.strip())


def _remove(path: str) -> None:
    from apache_beam.io.filesystems import FileSystems

    if FileSystems.exists(path):
        FileSystems.delete([path])
