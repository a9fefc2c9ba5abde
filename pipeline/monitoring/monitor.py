"""`hftfx monitor`: a window of what one served model version answered, against the data it was trained on.

The reference is the run that pushed that version, found in ML Metadata (else the newest blessed run, said so; for
a pipeline run on Vertex AI, in Vertex's record of its runs: vertex_reference.py):
its train split's texts and its eval split's texts and labels, all answered here by the same SavedModel. The
window is the version's prediction log (models/serving/prediction_log.py). The result is one line per check, a
verdict, and the accuracy estimated without labels; the same as JSON for a trigger.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from pathlib import Path

import numpy as np

from models.errors import UserError
from models.names import TEXT_FEATURE
from models.serving.prediction_log import LoggedWindow, read_window
from pipeline.config.pipeline_config import PipelineConfig
from pipeline.monitoring import labeling_queue
from pipeline.monitoring.accuracy_estimate import AccuracyEstimate, estimate_accuracy
from pipeline.monitoring.checks import CheckResult, Reference, run_checks
from pipeline.monitoring.descriptors import describe_logged, describe_texts, representation_of

MIN_WINDOW_ROWS = 200  # below this, distances between samples are mostly noise
REFERENCE_ROWS = 4_000  # of the train split (twice as many of the eval split, halved): distances settle long before


@dataclasses.dataclass(frozen=True)
class MonitorReport:
    version: str
    rows: int
    first: str
    last: str
    reference_run: str
    reference_note: str
    checks: tuple[CheckResult, ...]
    estimate: AccuracyEstimate | None
    skipped_lines: int
    skipped_shards: int
    label_names: tuple[str, ...] = ()
    queue: tuple[dict, ...] = ()  # Label Studio tasks of the texts most worth labeling (monitor's `queue`)

    @property
    def moved(self) -> list[str]:
        return [check.name for check in self.checks if check.moved]

    @property
    def verdict(self) -> str:
        return f"drift: {', '.join(self.moved)}" if self.moved else "no drift"

    def lines(self) -> list[str]:
        skipped = ""
        if self.skipped_lines or self.skipped_shards:
            skipped = f"; skipped {self.skipped_lines} lines and {self.skipped_shards} shards that were not rows"
        lines = [
            f"model version {self.version}: {self.rows:,} served rows from {self.first} to {self.last}{skipped}",
            f"against run {self.reference_run}'s training data{self.reference_note}",
            *(check.line() for check in self.checks),
            f"verdict: {self.verdict}",
        ]
        if self.estimate is not None:
            lines.append(self.estimate.line())
        return lines

    def message(self) -> tuple[bytes, dict[str, str]]:
        """(data, attributes) of the Pub/Sub notice of a drifted window (components/notifier's publish)."""
        event = "serving_drift" if self.moved else "no_drift"
        return json.dumps(self.to_json()).encode(), {"event": event, "model_version": self.version}

    def to_json(self) -> dict:
        return {
            "version": self.version,
            "rows": self.rows,
            "first": self.first,
            "last": self.last,
            "reference_run": self.reference_run,
            "drift": bool(self.moved),
            "verdict": self.verdict,
            "checks": [
                {**dataclasses.asdict(check), "moved": check.moved} for check in self.checks
            ],
            "estimated_accuracy": dataclasses.asdict(self.estimate) if self.estimate else None,
            "skipped_lines": self.skipped_lines,
            "skipped_shards": self.skipped_shards,
        }


@dataclasses.dataclass(frozen=True)
class ReferenceRun:
    """The run a served model came from: where its training data is, its labels and task."""

    run_id: str
    examples_uri: str
    label_names: tuple[str, ...]
    task: str


def reference_run(config: PipelineConfig, version: str, folder: str, vertex=None) -> tuple[ReferenceRun, str]:
    """The run that pushed `version`, else the newest blessed one (and a note saying so), from the config's ML
    Metadata; with none there and a cloud profile, the Vertex AI run that wrote `folder` (`vertex`: its
    PipelineServiceClient, made from the profile when None)."""
    from pipeline.reporting.metadata_reader import summarize_all

    runs = summarize_all(config.metadata_sqlite, config.pipeline_name, with_metrics=False)
    pushed = [run for run in runs if run.pushed_version == version and run.examples_uri]
    blessed = [run for run in runs if run.blessed and run.examples_uri]
    note = "" if pushed else f" (no run in {config.metadata_sqlite} pushed version {version}: the newest blessed run's)"
    if pushed or blessed:
        run = (pushed or blessed)[-1]
        return ReferenceRun(run.run_id, run.examples_uri, tuple(run.label_names), run.task), note
    if config.cloud.project:
        return _vertex_reference(config, folder, vertex), " (Vertex AI's record of the run)"
    raise UserError(
        f"no blessed run in {config.metadata_sqlite} to compare served traffic with: give the --config of the "
        "pipeline that trained the served model (its cloud profile, for a run on Vertex AI)"
    )


def _vertex_reference(config: PipelineConfig, folder: str, client) -> ReferenceRun:
    from models.task import read_contract
    from pipeline.monitoring.vertex_reference import pipeline_client, vertex_run

    run_id, examples_uri = vertex_run(config, client or pipeline_client(config), folder)
    contract = read_contract(folder)
    if contract is None:
        raise UserError(f"{folder} carries no task contract (assets.extra/task_contract.json): push it again")
    return ReferenceRun(run_id, examples_uri, contract.label_names, contract.task)


def build_reference(model, run: ReferenceRun) -> tuple[Reference, np.ndarray, np.ndarray]:
    """The reference the checks compare with, and the eval split's answers and label ids (for the estimate)."""
    from components.example_gen.written_examples import read_written

    train_texts, _ = read_written(run.examples_uri, "train", REFERENCE_ROWS)
    eval_texts, eval_labels = read_written(run.examples_uri, "eval", 2 * REFERENCE_ROWS)
    train, held = describe_texts(model, train_texts), describe_texts(model, eval_texts)
    half = len(held) // 2
    names = tuple(run.label_names)
    reference = Reference(train, held.take(np.arange(half)), held.take(np.arange(half, len(held))), names)
    index = {name: i for i, name in enumerate(names)}
    label_ids = np.array([index.get(label, -1) for label in eval_labels])
    return reference, held.probabilities, label_ids


def _checked_window(window: LoggedWindow, min_rows: int) -> None:
    if len(window.rows) < min_rows:
        raise UserError(
            f"the log holds {len(window.rows)} rows of model version {window.version} in this window; the monitor "
            f"needs at least {min_rows} ({min_rows - len(window.rows)} more): wait for traffic, widen --since, or "
            "lower --min-rows"
        )


def _served_window(log_dir, bigquery, model_dir, version, since) -> tuple[LoggedWindow, str]:
    """(the window, the pushed version it was served by): from a prediction log folder, or from an endpoint's
    BigQuery log, whose rows name a deployed model, not a version (so --model names the version's folder)."""
    if bigquery is None:
        window = read_window(log_dir, version, since)
        return window, window.version
    from pipeline.monitoring.bigquery_log import read_bigquery_window

    if not model_dir:
        raise UserError(
            "--bigquery needs --model: the folder the endpoint's model was uploaded from (the Model's artifactUri)"
        )
    return read_bigquery_window(bigquery, version, since), model_dir.rstrip("/").rsplit("/", 1)[-1]


def monitor(
    config: PipelineConfig,
    log_dir: str | None,
    model_dir: str | None = None,
    version: str | None = None,
    since: datetime.datetime | None = None,
    min_rows: int = MIN_WINDOW_ROWS,
    queue: int = 0,
    bigquery: str | None = None,
    vertex=None,
) -> MonitorReport:
    """The window's checks and estimate; with `queue`, also the Label Studio tasks of its `queue` texts most worth
    labeling. The window is `log_dir`'s rows, or `bigquery`'s (a Vertex endpoint's request-response log table);
    `vertex` is the PipelineServiceClient that finds a Vertex run's training data (made from the profile if None)."""
    from models.hub.remote_folder import is_remote, localize
    from models.serving.pushed_model import load_serving_model

    window, served_version = _served_window(log_dir, bigquery, model_dir, version, since)
    _checked_window(window, min_rows)
    if queue and any(TEXT_FEATURE not in row for row in window.rows):
        raise UserError("a labeling queue needs the texts, and this log holds hashes: serve with --log-texts full")
    folder = model_dir or f"{config.serving_dir.rstrip('/')}/{config.model_name}/{served_version}"
    run, note = reference_run(config, served_version, folder, vertex)
    if run.task == "multi_label":
        raise UserError("hftfx monitor compares single-label models; this one is multi-label")
    _, model = load_serving_model(localize(folder) if is_remote(folder) else folder)
    reference, eval_probabilities, eval_labels = build_reference(model, run)
    served = describe_logged(model, window.rows)
    checks = run_checks(reference, served, embed=representation_of(model))
    known = eval_labels >= 0
    estimate = estimate_accuracy(eval_probabilities[known], eval_labels[known], served.probabilities)
    times = sorted(row["time"] for row in window.rows)
    queued: list[dict] = []
    if queue:
        picked = labeling_queue.pick(served, reference.train.texts, queue)
        queued = labeling_queue.tasks(window.rows, picked, served, reference.label_names, window.version)
    return MonitorReport(
        window.version,
        len(window.rows),
        times[0],
        times[-1],
        run.run_id,
        note,
        tuple(checks),
        estimate,
        window.skipped_lines,
        window.skipped_shards,
        reference.label_names,
        tuple(queued),
    )


def report_path(reports_dir: str | Path, version: str, at: datetime.datetime) -> Path:
    """Where a report goes: one folder a model version, one file a run of the monitor."""
    return Path(reports_dir) / f"version={version}" / f"{at:%Y%m%dT%H%M%SZ}.json"


def drifted_report(reports_dir: str | Path, version: str) -> str | None:
    """The verdict of the newest report on `version` that found drift ("<file>: drift: ..."), or None."""
    for path in sorted((Path(reports_dir) / f"version={version}").glob("*.json"), reverse=True):
        try:
            report = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(report, dict) and report.get("drift"):
            return f"{path.name}: {report.get('verdict', 'drift')}"
    return None


def write_json(report: MonitorReport, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report.to_json(), indent=2) + "\n")
    return path
