"""The retraining decision as a pure function of the spans that exist and the runs that happened.

The same rules serve every entry point: `hftfx trigger` (runs from local ML Metadata), the Vertex
trigger and the Cloud Storage event handler (runs from Vertex pipeline jobs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence

from pipeline.config.retraining import RetrainingConfig

COMPLETE, FAILED, RUNNING, INTERRUPTED = "complete", "failed", "running", "interrupted"


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """One pipeline run as the decision sees it."""

    run_id: str
    span: int | None
    outcome: str  # complete (the Evaluator decided) | failed | running | interrupted
    blessed: bool | None = None
    pushed_version: str | None = None


@dataclasses.dataclass(frozen=True)
class FeatureDrift:
    feature: str
    measure: str  # "L-infinity" or "Jensen-Shannon"
    distance: float
    threshold: float

    @property
    def drifted(self) -> bool:
        return self.distance > self.threshold

    def describe(self) -> str:
        relation = ">" if self.drifted else "<="
        return f"{self.feature} {self.measure} {self.distance:.3f} {relation} {self.threshold:g}"


@dataclasses.dataclass(frozen=True)
class DriftReport:
    """The newest span against the training data of the blessed model (run `baseline_run`)."""

    span: int
    baseline_run: str
    baseline_spans: tuple[int, ...]
    features: tuple[FeatureDrift, ...]

    @property
    def drifted(self) -> bool:
        return any(f.drifted for f in self.features)

    def describe(self) -> str:
        return "; ".join(f.describe() for f in self.features)


@dataclasses.dataclass(frozen=True)
class Decision:
    action: str  # "train" or "skip"
    span: int | None
    reason: str
    attempt: int = 1  # 1 + the failed or interrupted runs of this span so far
    drift: DriftReport | None = None

    @property
    def train(self) -> bool:
        return self.action == "train"

    def lines(self) -> list[str]:
        """The decision as `hftfx trigger` prints it: the action, why, and each feature's drift if measured."""
        lines = [f"decision:  {self.action}" + (f" span {self.span}" if self.span is not None else "")]
        lines.append(f"reason:    {self.reason}")
        if self.drift is not None:
            report = self.drift
            lines.append(f"drift:     span {report.span} vs the training data of blessed run {report.baseline_run}")
            for feature in report.features:
                flag = "DRIFT" if feature.drifted else "ok"
                lines.append(
                    f"           {feature.feature:<12} {feature.measure:<15} {feature.distance:8.4f}"
                    f"  threshold {feature.threshold:g}  {flag}"
                )
        return lines


def _trained_by(record: RunRecord) -> str:
    verdict = {True: "blessed", False: "not blessed", None: "not evaluated"}[record.blessed]
    pushed = f", pushed version {record.pushed_version}" if record.pushed_version else ""
    return f"run {record.run_id} ({verdict}{pushed})"


def decide(
    available: Iterable[int],
    runs: Sequence[RunRecord],
    rules: RetrainingConfig,
    drift_check: Callable[[int], DriftReport | None] | None = None,
    served_drift: Callable[[str | None], str | None] | None = None,
) -> Decision:
    """Whether to train the newest span, and why; `drift_check(span)` is asked only when it could matter, and
    `served_drift(version)` (what the monitor found on the served version's traffic, or None) under serving_drift.

    A span is consumed by a complete run (blessed or not: the same data would give the same verdict).
    Failed or interrupted runs are retried up to `rules.max_attempts`. Older unconsumed spans are not trained
    on their own: the newest span supersedes them (a rolling window still reads them).
    """
    spans = sorted(set(available))
    if not spans:
        return Decision("skip", None, "no span of data exists yet")
    newest = spans[-1]
    of_newest = [r for r in runs if r.span == newest]
    complete = [r for r in of_newest if r.outcome == COMPLETE]
    if complete:
        return Decision("skip", newest, f"span {newest} was already trained by {_trained_by(complete[-1])}")
    running = [r for r in of_newest if r.outcome == RUNNING]
    if running:
        return Decision("skip", newest, f"span {newest} is being trained by run {running[-1].run_id}")
    failures = [r for r in of_newest if r.outcome in (FAILED, INTERRUPTED)]
    attempt = len(failures) + 1
    if len(failures) >= rules.max_attempts:
        return Decision(
            "skip",
            newest,
            f"span {newest} failed {len(failures)} times (runs {', '.join(r.run_id for r in failures)}), the "
            f"retraining.max_attempts limit; fix the cause, then `hftfx run --set dataset.span={newest}`",
            attempt,
        )
    consumed = {r.span for r in runs if r.outcome == COMPLETE}
    superseded = [s for s in spans[:-1] if s not in consumed]
    why = f"span {newest} is new: no complete run has consumed it"
    if failures:
        why += f" (attempt {attempt} of {rules.max_attempts}; {len(failures)} failed or interrupted)"
    if superseded:
        why += f"; unconsumed older spans {superseded} are superseded by it"
    report = drift_check(newest) if drift_check else None
    if rules.policy == "drift":
        return _on_drift(newest, why, attempt, report)
    if rules.policy == "serving_drift":
        return _on_served_drift(newest, why, attempt, runs, served_drift)
    return Decision("train", newest, why, attempt, report)


def _on_served_drift(newest: int, why: str, attempt: int, runs: Sequence[RunRecord], served_drift) -> Decision:
    """retraining.policy: serving_drift: a new labeled span trains once the monitor found the served model's
    traffic drifted (the first model trains on its first span: nothing is served yet)."""
    served = next((r.pushed_version for r in reversed(runs) if r.outcome == COMPLETE and r.pushed_version), None)
    if served is None:
        return Decision("train", newest, f"{why}; no model served yet to monitor", attempt)
    found = served_drift(served) if served_drift else None
    if found is None:
        quiet = f"span {newest} is new but the monitor found no drift in version {served}'s traffic"
        return Decision("skip", newest, quiet, attempt)
    return Decision("train", newest, f"{why}; the served version {served}'s traffic drifted: {found}", attempt)


def _on_drift(newest: int, why: str, attempt: int, report: DriftReport | None) -> Decision:
    """retraining.policy: drift: a new span trains only when it drifted from the blessed model's data."""
    if report is None:
        return Decision("train", newest, f"{why}; no blessed model yet to measure drift against", attempt)
    if not report.drifted:
        return Decision(
            "skip", newest, f"span {newest} is new but has not drifted: {report.describe()}", attempt, report
        )
    drifted = "; ".join(f.describe() for f in report.features if f.drifted)
    return Decision("train", newest, f"{why}; drift against the blessed model's data: {drifted}", attempt, report)


def newer_than(span: int, runs: Sequence[RunRecord]) -> RunRecord | None:
    """The run of the newest span above `span` that consumed its span or is training it: an event for `span`
    arriving after it (storage delivers out of order) would push a model of older data over that one's."""
    newer = [r for r in runs if r.span is not None and r.span > span and r.outcome in (COMPLETE, RUNNING)]
    return max(newer, key=lambda r: r.span, default=None)


def superseded_in_flight(runs: Sequence[RunRecord], event_span: int | None = None) -> list[RunRecord]:
    """Runs still training a span older than one already consumed or in flight: left alone they could push
    after the newer run and serve older data. The newest span wins; these are cancelled. With `event_span` (a
    storage event's), only runs it is at most one span ahead of: an event far ahead of a run in flight (a jump
    real data does not make) never cancels it."""
    newest = max((r.span for r in runs if r.span is not None and r.outcome in (COMPLETE, RUNNING)), default=None)
    return [
        r
        for r in runs
        if r.outcome == RUNNING
        and r.span is not None
        and newest is not None
        and r.span < newest
        and (event_span is None or event_span <= r.span + 1)
    ]


def outside_window(span: int, runs: Sequence[RunRecord], rules: RetrainingConfig) -> str | None:
    """Why an event's span is taken for a stray or forged marker, or None. Only real data moves the window: it is
    measured from the newest span a complete run consumed (a failed or running run of a forged span moves
    nothing); with no complete run, from retraining.first_span; with no run at all, first_span alone starts."""
    if not rules.max_span_gap:
        return None
    completed = [r.span for r in runs if r.span is not None and r.outcome == COMPLETE]
    if not completed and not any(r.span is not None for r in runs):
        if span == rules.first_span:
            return None
        return (
            f"span {span} is not retraining.first_span ({rules.first_span}), the only span a deployment with no "
            "runs yet starts from: taken for a stray or forged marker, not trained (set first_span to your first "
            "span's number)"
        )
    anchor = max(completed, default=rules.first_span)
    what = f"span {anchor}, the newest a complete run consumed" if completed else f"retraining.first_span ({anchor})"
    if span <= anchor + rules.max_span_gap:
        return None
    return (
        f"span {span} is more than retraining.max_span_gap ({rules.max_span_gap:,}) above {what}: taken for a "
        "stray or forged marker, not trained (raise max_span_gap if your span numbers jump that far)"
    )


def decide_event(span: int, runs: Sequence[RunRecord], rules: RetrainingConfig, from_storage: bool = True) -> Decision:
    """A given span (a storage event's, or a user's `--span`): refused when a newer span was already consumed or is
    in flight, and, from storage, when outside the window real data moves (outside_window: one stray marker must
    not become the newest span, which would cancel the real runs and refuse every real span after it); else the
    usual rules for that one span."""
    refused = outside_window(span, runs, rules) if from_storage else None
    if refused:
        return Decision("skip", span, refused)
    newer = newer_than(span, runs)
    if newer is not None:
        doing = "was trained" if newer.outcome == COMPLETE else "is being trained"
        return Decision(
            "skip",
            span,
            f"span {span} arrived after span {newer.span}, which {doing} by run {newer.run_id}: a model of the "
            "older span would replace the newer one (a span_window still reads it)",
        )
    return decide([span], runs, rules)
