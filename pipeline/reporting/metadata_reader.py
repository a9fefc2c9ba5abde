"""A run summary read back from ML Metadata and the run's artifacts: which component ran how long, what each
recorded (examples, task, evaluation, training, publication, scoring, push). Rendering is run_summary.py's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ml_metadata as mlmd
from ml_metadata.proto import metadata_store_pb2
from tfx.components.evaluator import constants as evaluator_constants
from tfx.components.tuner.executor import _DEFAULT_TUNER_RESULTS_FILE_NAME as TUNER_RESULTS_FILE  # TFX's name for it

from components.evaluator.eval_results import blessing_reason, read_metrics, read_slice_intervals
from components.evaluator.noise_aware_gate import read_comparisons, read_ungated
from components.publisher.executor import HUB_COMMIT_PROPERTY, HUB_TAG_PROPERTY, HUB_URL_PROPERTY, PUBLISHED_PROPERTY
from components.scorer.executor import BAD_ROWS_PROPERTY, ROWS_PROPERTY, SCORED_FILE
from components.scorer.executor import LABEL_COUNTS_PROPERTY as SCORER_LABEL_COUNTS
from components.trainer.training_meter import THROUGHPUT_FILE
from components.trainer.training_record import TrainingRecord
from models.names import (
    DROPPED_COUNTS_PROPERTY,
    LABEL_COUNTS_PROPERTY,
    LABEL_NAMES_PROPERTY,
    SPANS_PROPERTY,
    SPLIT_COUNTS_PROPERTY,
)
from models.task import MULTI_LABEL, TASK_CONTRACT_PROPERTY, TaskContract
from pipeline.reporting.run_summary import ComponentRun, RunSummary

_STATE_NAMES = {
    metadata_store_pb2.Execution.COMPLETE: "done",
    metadata_store_pb2.Execution.CACHED: "cached",
    metadata_store_pb2.Execution.FAILED: "failed",
    metadata_store_pb2.Execution.RUNNING: "running",
    metadata_store_pb2.Execution.CANCELED: "canceled",
}


def open_store(sqlite_path: str, read_only: bool = True) -> mlmd.MetadataStore:
    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = sqlite_path
    config.sqlite.connection_mode = (
        metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
        if read_only
        else metadata_store_pb2.SqliteMetadataSourceConfig.READWRITE_OPENCREATE
    )
    return mlmd.MetadataStore(config)


def run_contexts(store: mlmd.MetadataStore, pipeline_name: str) -> list:
    """Every run of the pipeline, oldest first."""
    pipeline = store.get_context_by_type_and_name("pipeline", pipeline_name)
    if pipeline is None:
        return []
    run_ids = {c.id for c in store.get_contexts_by_type("pipeline_run")}
    runs = {}
    for execution in store.get_executions_by_context(pipeline.id):
        for context in store.get_contexts_by_execution(execution.id):
            if context.id in run_ids:
                runs[context.id] = context
    return sorted(runs.values(), key=lambda c: (c.create_time_since_epoch, c.id))


def latest_run_context(store: mlmd.MetadataStore, pipeline_name: str):
    runs = run_contexts(store, pipeline_name)
    return runs[-1] if runs else None


def node_name(store, execution, pipeline_name: str) -> str:
    for context in store.get_contexts_by_execution(execution.id):
        if context.type == "node":
            return context.name.removeprefix(f"{pipeline_name}.")
    return execution.type.rsplit(".", 1)[-1]


def output_artifacts(store, execution) -> dict[str, Any]:
    """Output artifacts of an execution, by output key."""
    events = [
        e
        for e in store.get_events_by_execution_ids([execution.id])
        if e.type in (metadata_store_pb2.Event.OUTPUT, metadata_store_pb2.Event.DECLARED_OUTPUT)
    ]
    artifacts = {a.id: a for a in store.get_artifacts_by_id([e.artifact_id for e in events])}
    return {e.path.steps[0].key: artifacts[e.artifact_id] for e in events if e.path.steps}


def _read_throughput(model_run_uri: str) -> dict[str, Any]:
    path = Path(model_run_uri) / THROUGHPUT_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def _custom(artifact, name: str):
    value = artifact.custom_properties.get(name)
    if value is None:
        return None
    return getattr(value, value.WhichOneof("value"))


def _recorded_store(sqlite_path: str) -> mlmd.MetadataStore | None:
    """The store, read-only; None before the first run wrote it (a read-only open of no file fails)."""
    return open_store(sqlite_path) if Path(sqlite_path).exists() else None


def summarize(sqlite_path: str, pipeline_name: str) -> RunSummary | None:
    """The latest run of `pipeline_name` recorded in the MLMD sqlite file, or None if there is none."""
    store = _recorded_store(sqlite_path)
    if store is None:
        return None
    run = latest_run_context(store, pipeline_name)
    return None if run is None else summarize_run(store, run, pipeline_name)


def summarize_all(sqlite_path: str, pipeline_name: str, with_metrics: bool = True) -> list[RunSummary]:
    """Every run, oldest first; without metrics it reads ML Metadata only (no TFMA results)."""
    store = _recorded_store(sqlite_path)
    if store is None:
        return []
    return [summarize_run(store, run, pipeline_name, with_metrics) for run in run_contexts(store, pipeline_name)]


def summarize_run(store: mlmd.MetadataStore, run, pipeline_name: str, with_metrics: bool = True) -> RunSummary:
    """One run, filled in from each execution's outputs as ML Metadata recorded them."""
    executions = sorted(store.get_executions_by_context(run.id), key=lambda e: e.create_time_since_epoch)
    summary = RunSummary(
        pipeline_name=pipeline_name,
        run_id=run.name,
        components=[],
        split_counts={},
        label_names=[],
        metrics={},
        blessed=None,
        blessing_reason="the Evaluator did not run",
        pushed_dir=None,
        pushed_version=None,
        started_ms=executions[0].create_time_since_epoch if executions else run.create_time_since_epoch,
    )
    for execution in executions:
        name = node_name(store, execution, pipeline_name)
        seconds = (execution.last_update_time_since_epoch - execution.create_time_since_epoch) / 1000
        summary.components.append(ComponentRun(name, _STATE_NAMES.get(execution.last_known_state, "?"), seconds))
        outputs = output_artifacts(store, execution)
        for key, read in OUTPUT_READERS:
            if key in outputs:
                read(summary, outputs, with_metrics)
    return summary


def _read_examples(summary: RunSummary, outputs: dict, with_metrics: bool) -> None:
    examples = outputs["examples"]
    if not _custom(examples, SPLIT_COUNTS_PROPERTY):
        return  # the Transform's transformed examples carry none of these
    summary.examples_uri = examples.uri
    summary.split_counts = json.loads(_custom(examples, SPLIT_COUNTS_PROPERTY))
    summary.label_names = json.loads(_custom(examples, LABEL_NAMES_PROPERTY) or "[]")
    summary.dropped_counts = json.loads(_custom(examples, DROPPED_COUNTS_PROPERTY) or "{}")
    summary.label_counts = json.loads(_custom(examples, LABEL_COUNTS_PROPERTY) or "{}")
    summary.span = examples.properties["span"].int_value if "span" in examples.properties else None
    recorded = json.loads(_custom(examples, SPANS_PROPERTY) or "[]")
    summary.spans = recorded or ([summary.span] if summary.span is not None else [])


def _read_model(summary: RunSummary, outputs: dict, with_metrics: bool) -> None:
    contract = _custom(outputs["model"], TASK_CONTRACT_PROPERTY)
    if contract:
        summary.task = TaskContract.from_json(contract).task


def _read_evaluation(summary: RunSummary, outputs: dict, with_metrics: bool) -> None:
    if "evaluation" not in outputs:
        return
    summary.blessed = bool(_custom(outputs["blessing"], "blessed"))
    baseline = _custom(outputs["blessing"], evaluator_constants.ARTIFACT_PROPERTY_BASELINE_MODEL_URI_KEY)
    summary.baseline_uri = baseline or None
    summary.blessing_reason = "see the run report"
    if with_metrics:
        uri, multi_label = outputs["evaluation"].uri, summary.task == MULTI_LABEL
        summary.metrics, summary.slices, summary.per_class = read_metrics(
            uri, summary.label_names, "candidate", multi_label
        )
        summary.baseline_metrics, summary.baseline_slices, _ = read_metrics(
            uri, summary.label_names, "baseline", multi_label
        )
        by_slice = read_slice_intervals(uri, summary.label_names)
        summary.intervals, summary.changes = by_slice.pop("", ({}, {}))
        summary.slice_changes = {name: changes for name, (_, changes) in by_slice.items() if changes}
        summary.slice_verdicts = [c for c in read_comparisons(uri) if c.slice]
        summary.ungated_slices = {u.slice: u.reason for u in read_ungated(uri)}
        summary.blessing_reason = blessing_reason(uri, summary.blessed)


def _read_model_run(summary: RunSummary, outputs: dict, with_metrics: bool) -> None:
    summary.throughput = _read_throughput(outputs["model_run"].uri)
    summary.training = TrainingRecord.read(outputs["model_run"].uri)
    if summary.training and summary.training.recipe:  # what it trained with; the preflight's is the fallback
        summary.recipe = summary.training.recipe


def _read_published(summary: RunSummary, outputs: dict, with_metrics: bool) -> None:
    published = outputs["hf_model"]
    if not _custom(published, PUBLISHED_PROPERTY):
        return
    summary.hf_model_dir = published.uri
    if _custom(published, HUB_URL_PROPERTY):
        summary.hub_revision = (
            f"{_custom(published, HUB_URL_PROPERTY)}@{_custom(published, HUB_TAG_PROPERTY)} "
            f"({_custom(published, HUB_COMMIT_PROPERTY)})"
        )


def _read_scored(summary: RunSummary, outputs: dict, with_metrics: bool) -> None:
    scored = outputs["scored"]
    if not _custom(scored, ROWS_PROPERTY):
        return
    summary.scored = {
        "file": f"{scored.uri}/{SCORED_FILE}",
        "rows": _custom(scored, ROWS_PROPERTY),
        "bad_rows": _custom(scored, BAD_ROWS_PROPERTY),
        "label_counts": json.loads(_custom(scored, SCORER_LABEL_COUNTS)),
    }


def _read_pushed(summary: RunSummary, outputs: dict, with_metrics: bool) -> None:
    pushed = outputs["pushed_model"]
    if _custom(pushed, "pushed"):
        summary.pushed_dir = _custom(pushed, "pushed_destination")
        summary.pushed_version = _custom(pushed, "pushed_version")


def _read_tuning(summary: RunSummary, outputs: dict, with_metrics: bool) -> None:
    """The Tuner's trials as TFX wrote them (tuner_results.json: trial id, score, values; best first)."""
    path = Path(outputs["tuner_results"].uri) / TUNER_RESULTS_FILE
    if path.is_file():
        summary.trials = json.loads(path.read_text(encoding="utf-8"))


# (output key, reader): each execution's outputs, read by what they hold
OUTPUT_READERS = (
    ("examples", _read_examples),
    ("model", _read_model),
    ("blessing", _read_evaluation),
    ("model_run", _read_model_run),
    ("tuner_results", _read_tuning),
    ("hf_model", _read_published),
    ("scored", _read_scored),
    ("pushed_model", _read_pushed),
)
