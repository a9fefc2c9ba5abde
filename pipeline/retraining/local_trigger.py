"""`hftfx trigger` on this machine: decide from the local ML Metadata, run with LocalDagRunner.

Exactly once per span: the decision is taken and the run started while holding the pipeline root's lock
(an flock the kernel drops when its holder dies), so two triggers firing together start one run, and a
trigger killed mid-run leaves an interrupted run that the next trigger retries.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable

from components.example_gen import spans
from pipeline.config.pipeline_config import ConfigError, PipelineConfig
from pipeline.orchestration import preflight
from pipeline.orchestration.root_lock import PipelineRootBusyError, pipeline_root_lock
from pipeline.reporting.metadata_reader import summarize_all
from pipeline.reporting.run_summary import RunSummary
from pipeline.retraining import decision


def require_spans(config: PipelineConfig) -> None:
    if not spans.is_spanned(config.dataset):
        raise ConfigError(
            "triggers need span-versioned data: put {SPAN} in dataset.data_files or dataset.split_files, "
            "e.g. --data-files 'data/span-{SPAN}/*.csv'"
        )


def run_records(config: PipelineConfig, lock_held: bool) -> list[decision.RunRecord]:
    """Past runs from ML Metadata. Under the lock nothing else can be running: a 'running' run was killed."""
    records = []
    for summary in summarize_all(config.metadata_sqlite, config.pipeline_name, with_metrics=False):
        outcome = summary.outcome
        if outcome == decision.RUNNING and lock_held:
            outcome = decision.INTERRUPTED
        records.append(
            decision.RunRecord(summary.run_id, summary.span, outcome, summary.blessed, summary.pushed_version)
        )
    return records


def check(
    config: PipelineConfig, *, lock_held: bool = False, measure_drift: bool = False, span: int | None = None
) -> decision.Decision:
    """The decision, without running anything. Drift is measured under the drift policy or when asked.

    `span` limits the decision to that span (it must exist), as a storage event does.
    """
    require_spans(config)
    from pipeline.retraining import drift

    drift_check = None
    if config.retraining.policy == "drift" or measure_drift:

        def drift_check(span: int):
            return drift.measure(config, span)

    available = spans.available_spans(config.dataset)
    if span is not None:
        if span not in available:
            raise spans.SpanError(f"span {span} has no (ready) data; available spans: {sorted(available)}")
        available = {span: available[span]}
    served_drift = None
    if config.retraining.policy == "serving_drift":
        from pipeline.monitoring.monitor import drifted_report

        def served_drift(version: str | None):
            return drifted_report(config.retraining.monitor_reports, version)

    records = run_records(config, lock_held)
    return decision.decide(available, records, config.retraining, drift_check, served_drift)


@dataclasses.dataclass
class TriggerResult:
    decision: decision.Decision
    summary: RunSummary | None = None  # the run it started, if any


def trigger_run(
    config: PipelineConfig, *, stream=sys.stdout, verbose: bool = False, span: int | None = None
) -> TriggerResult:
    """Decides and, if the decision is to train, runs the pipeline for that span, all under the lock."""
    from pipeline.orchestration.local_runner import run_local

    require_spans(config)
    preflight.check_paths(config)
    try:
        with pipeline_root_lock(config.pipeline_root):
            chosen = check(config, lock_held=True, span=span)
            print(f"[trigger] {chosen.action}: {chosen.reason}", file=stream, flush=True)
            if not chosen.train:
                return TriggerResult(chosen)
            dataset = config.dataset.model_copy(update={"span": chosen.span})
            summary = run_local(
                config.model_copy(update={"dataset": dataset}), verbose=verbose, stream=stream, lock_held=True
            )
            return TriggerResult(chosen, summary)
    except PipelineRootBusyError as busy:
        reason = f"another run holds the pipeline root; nothing started ({busy})"
        print(f"[trigger] skip: {reason}", file=stream, flush=True)
        return TriggerResult(decision.Decision("skip", None, reason))


def watch(
    config: PipelineConfig,
    *,
    interval: float | None = None,
    max_polls: int | None = None,
    stream=sys.stdout,
    sleep: Callable[[float], None] = time.sleep,
    verbose: bool = False,
) -> int:
    """Polls with `trigger_run` every `interval` seconds; a failed run is reported and retried later."""
    interval = interval or config.retraining.poll_seconds
    polls = runs = 0
    while max_polls is None or polls < max_polls:
        polls += 1
        try:
            result = trigger_run(config, stream=stream, verbose=verbose)
            runs += result.summary is not None
            if result.summary is not None:
                print(result.summary.render(), file=stream, flush=True)
        except Exception as error:  # a watcher outlives one bad run; MLMD records the failure
            print(f"[trigger] run failed: {type(error).__name__}: {error}", file=stream, flush=True)
        if max_polls is None or polls < max_polls:
            sleep(interval)
    return runs
