"""What a person wants to know after a run, read back from ML Metadata and the run's artifacts."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import ml_metadata as mlmd
from ml_metadata.proto import metadata_store_pb2
from tfx.components.evaluator import constants as evaluator_constants

from components.batch_scorer import BAD_ROWS_PROPERTY, ROWS_PROPERTY, SCORED_FILE
from components.batch_scorer import LABEL_COUNTS_PROPERTY as SCORER_LABEL_COUNTS
from components.class_metrics import SUBSET_ACCURACY
from components.eval_results import blessing_reason, read_metrics
from components.evaluation import ACCURACY, AUC
from components.hf_publisher import HUB_COMMIT_PROPERTY, HUB_TAG_PROPERTY, HUB_URL_PROPERTY, PUBLISHED_PROPERTY
from components.training_meter import THROUGHPUT_FILE
from components.training_record import TrainingRecord
from models.contract import (
    DROPPED_COUNTS_PROPERTY,
    LABEL_COUNTS_PROPERTY,
    LABEL_NAME_FEATURE,
    LABEL_NAMES_PROPERTY,
    SPANS_PROPERTY,
    SPLIT_COUNTS_PROPERTY,
)
from models.task import MULTI_LABEL, SINGLE_LABEL, TASK_CONTRACT_PROPERTY, TaskContract

_STATE_NAMES = {
    metadata_store_pb2.Execution.COMPLETE: "done",
    metadata_store_pb2.Execution.CACHED: "cached",
    metadata_store_pb2.Execution.FAILED: "failed",
    metadata_store_pb2.Execution.RUNNING: "running",
    metadata_store_pb2.Execution.CANCELED: "canceled",
}


@dataclasses.dataclass
class ComponentRun:
    name: str
    state: str
    seconds: float


@dataclasses.dataclass
class RunSummary:
    pipeline_name: str
    run_id: str
    components: list[ComponentRun]
    split_counts: dict[str, int]
    label_names: list[str]
    metrics: dict[str, float]
    blessed: bool | None
    blessing_reason: str
    pushed_dir: str | None
    pushed_version: str | None
    wall_seconds: float = 0.0
    peak_rss_bytes: int = 0
    slices: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    baseline_metrics: dict[str, float] = dataclasses.field(default_factory=dict)  # the blessed model compared
    span: int | None = None  # the span the run is named after (the newest it read)
    spans: list[int] = dataclasses.field(default_factory=list)  # every span it read
    started_ms: int = 0  # when the run's first execution was created (ms since the epoch)
    examples_uri: str | None = None  # what the ExampleGen wrote (drift compares new data with it)
    dropped_counts: dict[str, int] = dataclasses.field(default_factory=dict)  # rows left out for missing values
    label_counts: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)  # {split: {label: n}}
    per_class: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)  # K > 2 (see _read_metrics)
    throughput: dict[str, Any] = dataclasses.field(default_factory=dict)  # the Trainer's, see training_meter
    training: TrainingRecord | None = None  # epochs run, best epoch, class weights (components/training_record)
    task: str = ""  # single_label | multi_label: the trained model's task contract (models/task.py)
    baseline_uri: str | None = None  # the blessed model of the same task the Evaluator compared; None: first
    hf_model_dir: str | None = None  # the blessed model in the Hugging Face layout, with its card (HFPublisher)
    hub_revision: str | None = None  # <repo url>@<tag> (<commit>) when the HFPublisher pushed it to a Hub
    scored: dict[str, Any] = dataclasses.field(default_factory=dict)  # the BatchScorer's: file, rows, labels

    @property
    def outcome(self) -> str:
        """complete (the Evaluator decided), failed, running, or interrupted (stopped without a failure)."""
        states = {c.name: c.state for c in self.components}
        if "failed" in states.values():
            return "failed"
        if states.get("Evaluator") in ("done", "cached"):
            return "complete"
        return "running" if "running" in states.values() else "interrupted"

    def to_json(self) -> dict[str, Any]:
        return {
            "pipeline_name": self.pipeline_name,
            "run_id": self.run_id,
            "span": self.span,
            "spans": self.spans,
            "outcome": self.outcome,
            "wall_seconds": round(self.wall_seconds, 2),
            "components": {c.name: round(c.seconds, 2) for c in self.components},
            "component_states": {c.name: c.state for c in self.components},
            "split_counts": self.split_counts,
            "dropped_counts": self.dropped_counts,
            "label_counts": self.label_counts,
            "label_names": self.label_names,
            "metrics": self.metrics,
            "slices": self.slices,
            "per_class": self.per_class,
            "baseline_metrics": self.baseline_metrics,
            "blessed": self.blessed,
            "blessing_reason": self.blessing_reason,
            "pushed_dir": self.pushed_dir,
            "pushed_version": self.pushed_version,
            "peak_rss_bytes": self.peak_rss_bytes,
            "throughput": self.throughput,
            "task": self.task,
            "training": dataclasses.asdict(self.training) if self.training else None,
            "baseline_uri": self.baseline_uri,
            "hf_model_dir": self.hf_model_dir,
            "hub_revision": self.hub_revision,
            "scored": self.scored,
        }

    def render(self) -> str:
        lines = [f"Run {self.run_id} of pipeline '{self.pipeline_name}'", ""]
        lines.append(f"  {'component':<32}{'state':<10}{'seconds':>9}")
        for c in self.components:
            lines.append(f"  {c.name:<32}{c.state:<10}{c.seconds:>9.1f}")
        lines.append(f"  {'total wall time':<42}{self.wall_seconds:>9.1f}")
        lines.append("")
        counts = ", ".join(f"{k} {v:,}" for k, v in self.split_counts.items())
        task = f"{self.task.replace('_', '-')}, " if self.task else ""
        lines.append(f"  examples      {counts}   {task}labels {self.label_names}")
        if self.label_counts.get("train"):
            shown = ", ".join(f"{label} {n:,}" for label, n in self.label_counts["train"].items())
            lines.append(f"  train labels  {shown}")
        if any(self.dropped_counts.values()):
            dropped = ", ".join(f"{k} {v:,}" for k, v in self.dropped_counts.items())
            lines.append(f"  dropped       {dropped} (rows with a missing text or label; dataset.missing_text: drop)")
        if self.spans and self.spans != [0]:
            lines.append(f"  data          span {self.span} (spans read: {', '.join(map(str, self.spans))})")
        shown = ", ".join(f"{k} {v:.4f}" for k, v in self.metrics.items() if k != "example_count")
        lines.append(f"  test split    {shown}")
        for name, values in self.slices.items():
            # AUC is undefined on a slice that holds a single label.
            auc = "" if name.startswith(f"{LABEL_NAME_FEATURE}=") else f"  auc {values.get(AUC, float('nan')):.3f}"
            accuracy = ACCURACY if ACCURACY in values else SUBSET_ACCURACY  # multi-label: the exact label set
            lines.append(
                f"    {name:<24} n={int(values.get('example_count', 0)):<6} {accuracy.replace('_', ' ')} "
                f"{values.get(accuracy, float('nan')):.3f}{auc}"
            )
        for label, values in self.per_class.items():
            shown = "  ".join(f"{k} {values[k]:.3f}" for k in ("auc", "precision", "recall", "f1") if k in values)
            lines.append(f"    class {label:<18} {shown}")
        if self.blessed is not None:
            baseline = self.baseline_uri or "none: the first blessed model of this task, judged on thresholds alone"
            lines.append(f"  baseline      {baseline}")
        verdict = {True: "BLESSED", False: "NOT blessed", None: "not evaluated"}[self.blessed]
        lines.append(f"  blessing      {verdict}: {self.blessing_reason}")
        pushed = f"{self.pushed_dir} (version {self.pushed_version})" if self.pushed_dir else "nothing pushed"
        lines.append(f"  pushed        {pushed}")
        if self.hf_model_dir:
            lines.append(f"  hugging face  {self.hf_model_dir} (from_pretrained folder with its model card)")
        if self.hub_revision:
            lines.append(f"  hub           {self.hub_revision}")
        if self.scored:
            labels = ", ".join(f"{k} {v:,}" for k, v in self.scored["label_counts"].items())
            lines.append(
                f"  scored        {self.scored['rows']:,} rows ({labels}; {self.scored['bad_rows']:,} set aside) "
                f"-> {self.scored['file']}"
            )
        if self.training:
            lines.append(f"  epochs        {self.training.describe_epochs()}")
            lines.append(f"  class weights {self.training.describe_class_weights()}")
        if self.throughput:
            lines.append(f"  training      {describe_throughput(self.throughput)}")
        if self.peak_rss_bytes:
            lines.append(f"  peak memory   {self.peak_rss_bytes / 2**30:.2f} GiB")
        return "\n".join(lines)


def describe_throughput(throughput: dict[str, Any]) -> str:
    """The Trainer's rate as examples/s and as a share of this machine's matmul peak."""
    text = (
        f"{throughput['examples_per_second']:.1f} examples/s, model {throughput['model_gflops_per_second']:.1f} GFLOP/s"
    )
    if throughput.get("utilization") is not None:
        text += (
            f" = {throughput['utilization']:.0%} of this machine's {throughput['matmul_peak_dtype']} matmul peak "
            f"({throughput['matmul_peak_gflops']:.0f} GFLOP/s)"
        )
    return text + f"; padding {throughput['padding_share']:.0%} of tokens"


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
        if "examples" in outputs and _custom(outputs["examples"], SPLIT_COUNTS_PROPERTY):
            examples = outputs["examples"]
            summary.examples_uri = examples.uri
            summary.split_counts = json.loads(_custom(examples, SPLIT_COUNTS_PROPERTY))
            summary.label_names = json.loads(_custom(examples, LABEL_NAMES_PROPERTY) or "[]")
            summary.dropped_counts = json.loads(_custom(examples, DROPPED_COUNTS_PROPERTY) or "{}")
            summary.label_counts = json.loads(_custom(examples, LABEL_COUNTS_PROPERTY) or "{}")
            summary.span = examples.properties["span"].int_value if "span" in examples.properties else None
            recorded = json.loads(_custom(examples, SPANS_PROPERTY) or "[]")
            summary.spans = recorded or ([summary.span] if summary.span is not None else [])
        if "model" in outputs and _custom(outputs["model"], TASK_CONTRACT_PROPERTY):
            summary.task = TaskContract.from_json(_custom(outputs["model"], TASK_CONTRACT_PROPERTY)).task
        if "blessing" in outputs and "evaluation" in outputs:
            summary.blessed = bool(_custom(outputs["blessing"], "blessed"))
            summary.baseline_uri = (
                _custom(outputs["blessing"], evaluator_constants.ARTIFACT_PROPERTY_BASELINE_MODEL_URI_KEY) or None
            )
            summary.blessing_reason = "see the run report"
            if with_metrics:
                uri = outputs["evaluation"].uri
                multi_label = summary.task == MULTI_LABEL
                read = read_metrics(uri, summary.label_names, multi_label=multi_label)
                summary.metrics, summary.slices, summary.per_class = read
                summary.baseline_metrics, _, _ = read_metrics(uri, summary.label_names, "baseline", multi_label)
                summary.blessing_reason = blessing_reason(uri, summary.blessed)
        if "model_run" in outputs:
            summary.throughput = _read_throughput(outputs["model_run"].uri)
            summary.training = TrainingRecord.read(outputs["model_run"].uri)
        if "hf_model" in outputs and _custom(outputs["hf_model"], PUBLISHED_PROPERTY):
            published = outputs["hf_model"]
            summary.hf_model_dir = published.uri
            if _custom(published, HUB_URL_PROPERTY):
                summary.hub_revision = (
                    f"{_custom(published, HUB_URL_PROPERTY)}@{_custom(published, HUB_TAG_PROPERTY)} "
                    f"({_custom(published, HUB_COMMIT_PROPERTY)})"
                )
        if "scored" in outputs and _custom(outputs["scored"], ROWS_PROPERTY):
            scored = outputs["scored"]
            summary.scored = {
                "file": f"{scored.uri}/{SCORED_FILE}",
                "rows": _custom(scored, ROWS_PROPERTY),
                "bad_rows": _custom(scored, BAD_ROWS_PROPERTY),
                "label_counts": json.loads(_custom(scored, SCORER_LABEL_COUNTS)),
            }
        if "pushed_model" in outputs and _custom(outputs["pushed_model"], "pushed"):
            summary.pushed_dir = _custom(outputs["pushed_model"], "pushed_destination")
            summary.pushed_version = _custom(outputs["pushed_model"], "pushed_version")
    return summary


RUN_COLUMNS = (
    ("run", 28),
    ("started (UTC)", 17),
    ("spans", 9),
    ("task", 13),
    ("labels", 24),
    ("outcome", 12),
    ("accuracy", 9),
    ("auc", 7),
)
TASK_SHORT = {SINGLE_LABEL: "single-label", MULTI_LABEL: "multi-label"}


def _shown_labels(names: list[str], width: int) -> str:
    text = ",".join(names) or "-"
    return text if len(text) < width else text[: width - 4] + "..."


def render_runs(summaries: list[RunSummary]) -> str:
    """One line per run, oldest first: what `hftfx runs` prints."""
    import datetime

    lines = [" ".join(f"{name:<{width}}" for name, width in RUN_COLUMNS) + " blessed  pushed"]
    for s in summaries:
        started = datetime.datetime.fromtimestamp(s.started_ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M")
        cells = (
            s.run_id[:28],
            started,
            ",".join(map(str, s.spans)) or "-",
            TASK_SHORT.get(s.task, "-"),
            _shown_labels(s.label_names, 24),
            s.outcome,
            f"{s.metrics[ACCURACY]:.4f}" if ACCURACY in s.metrics else "-",
            f"{s.metrics[AUC]:.4f}" if AUC in s.metrics else "-",
        )
        blessed = {True: "yes", False: "no", None: "-"}[s.blessed]
        pushed = f"version {s.pushed_version}" if s.pushed_version else "-"
        row = " ".join(f"{cell:<{width}}" for cell, (_, width) in zip(cells, RUN_COLUMNS, strict=True))
        lines.append(f"{row} {blessed:<8} {pushed}")
    return "\n".join(lines)
