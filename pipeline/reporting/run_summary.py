"""What a person wants to know after a run, and how it is shown: the summary printed at the end of a run and
the table of `hftfx runs`. pipeline/reporting/metadata_reader.py fills it from ML Metadata."""

from __future__ import annotations

import dataclasses
from typing import Any

from components.evaluator.metric_names import ACCURACY, AUC, SUBSET_ACCURACY
from components.trainer.training_record import TrainingRecord, describe_values, rate_text
from models.names import (
    LABEL_NAME_FEATURE,
)
from models.task import MULTI_LABEL, SINGLE_LABEL


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
    intervals: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)  # 95%, where computed
    changes: dict[str, tuple[float, float, float]] = dataclasses.field(default_factory=dict)  # vs baseline, 95%
    span: int | None = None  # the span the run is named after (the newest it read)
    spans: list[int] = dataclasses.field(default_factory=list)  # every span it read
    started_ms: int = 0  # when the run's first execution was created (ms since the epoch)
    examples_uri: str | None = None  # what the ExampleGen wrote (drift compares new data with it)
    dropped_counts: dict[str, int] = dataclasses.field(default_factory=dict)  # rows left out for missing values
    label_counts: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)  # {split: {label: n}}
    per_class: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)  # K > 2 (see _read_metrics)
    throughput: dict[str, Any] = dataclasses.field(default_factory=dict)  # the Trainer's, see training_meter
    training: TrainingRecord | None = None  # epochs run, best epoch, class weights (trainer/training_record.py)
    task: str = ""  # single_label | multi_label: the trained model's task contract (models/task.py)
    baseline_uri: str | None = None  # the blessed model of the same task the Evaluator compared; None: first
    hf_model_dir: str | None = None  # the blessed model in the Hugging Face layout, with its card (HFPublisher)
    hub_revision: str | None = None  # <repo url>@<tag> (<commit>) when the HFPublisher pushed it to a Hub
    scored: dict[str, Any] = dataclasses.field(default_factory=dict)  # the BatchScorer's: file, rows, labels
    lengths: str = ""  # the training texts' token lengths and the max_seq_length chosen (the run's preflight)
    recipe: str = ""  # learning rate, warm-up and clipping, and why: the Trainer's, else the run's preflight's
    trials: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # the Tuner's, best first
    # Per slice, vs the blessed baseline: {slice: {metric: (change, lower, upper)}} where intervals were computed,
    # the baseline's own metrics, the gate's judgements on the user's slices, the slices it left ungated and why.
    slice_changes: dict[str, dict[str, tuple[float, float, float]]] = dataclasses.field(default_factory=dict)
    baseline_slices: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    slice_verdicts: list[Any] = dataclasses.field(default_factory=list)  # noise_aware_gate.Comparison
    ungated_slices: dict[str, str] = dataclasses.field(default_factory=dict)

    def deciding_slices(self) -> list[str]:
        """The slices whose loss against the baseline refused the blessing, worst first: `language=de auc -0.2812
        (95% -0.35 to -0.21; allowed -0)`."""
        refused = sorted((c for c in self.slice_verdicts if not c.within_noise), key=lambda c: c.upper)
        return [
            f"{c.slice} {c.metric} {c.change:+.4f} (95% {c.lower:+.4f} to {c.upper:+.4f}; allowed {c.allowed:+.2g})"
            for c in refused
        ]

    def with_interval(self, metric: str) -> str:
        """`0.8268 (0.8050-0.8480)`: the metric with its 95% interval where one was computed."""
        shown = f"{self.metrics.get(metric, float('nan')):.4f}"
        if metric in self.intervals:
            low, high = self.intervals[metric]
            shown += f" ({low:.4f}-{high:.4f})"
        return shown

    def describe_changes(self) -> str:
        """`auc -0.0012 (95% -0.0115 to +0.0091)`: candidate minus baseline, each with its paired interval."""
        return ", ".join(
            f"{k} {change:+.4f} (95% {low:+.4f} to {high:+.4f})" for k, (change, low, high) in self.changes.items()
        )

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
            "lengths": self.lengths,
            "recipe": self.recipe,
            "intervals": self.intervals,
            "changes": self.changes,
            "slice_changes": self.slice_changes,
            "baseline_slices": self.baseline_slices,
            "slice_verdicts": [dataclasses.asdict(c) for c in self.slice_verdicts],
            "ungated_slices": self.ungated_slices,
            "trials": self.trials,
        }

    def render(self) -> str:
        sections = (self._component_lines, self._data_lines, self._evaluation_lines, self._output_lines)
        return "\n".join(line for section in (*sections, self._training_lines) for line in section())

    def _component_lines(self) -> list[str]:
        """Each component, its state and seconds, and the wall time."""
        lines = [f"Run {self.run_id} of pipeline '{self.pipeline_name}'", ""]
        lines.append(f"  {'component':<32}{'state':<10}{'seconds':>9}")
        for c in self.components:
            lines.append(f"  {c.name:<32}{c.state:<10}{c.seconds:>9.1f}")
        lines.append(f"  {'total wall time':<42}{self.wall_seconds:>9.1f}")
        lines.append("")
        return lines

    def _data_lines(self) -> list[str]:
        """The examples, their labels, what was dropped, and the choices made from them."""
        lines: list[str] = []
        counts = ", ".join(f"{k} {v:,}" for k, v in self.split_counts.items())
        task = f"{self.task.replace('_', '-')}, " if self.task else ""
        lines.append(f"  examples      {counts}   {task}labels {self.label_names}")
        if self.label_counts.get("train"):
            shown = ", ".join(f"{label} {n:,}" for label, n in self.label_counts["train"].items())
            lines.append(f"  train labels  {shown}")
        if any(self.dropped_counts.values()):
            dropped = ", ".join(f"{k} {v:,}" for k, v in self.dropped_counts.items())
            lines.append(f"  dropped       {dropped} (rows with a missing text or label; dataset.missing_text: drop)")
        if self.lengths:
            lines.append(f"  lengths       {self.lengths.removeprefix('lengths: ')}")
        if self.recipe:
            lines.append(f"  recipe        {self.recipe}")
        if self.spans and self.spans != [0]:
            lines.append(f"  data          span {self.span} (spans read: {', '.join(map(str, self.spans))})")
        return lines

    def _evaluation_lines(self) -> list[str]:
        """The test split, its slices and classes, the baseline and the verdict."""
        lines: list[str] = []
        shown = ", ".join(f"{k} {self.with_interval(k)}" for k in self.metrics if k != "example_count")
        lines.append(f"  test split    {shown}" + (" (95% intervals)" if self.intervals else ""))
        for refused in self.deciding_slices():
            lines.append(f"  refused on    {refused}")
        for name, values in self.slices.items():
            # AUC is undefined on a slice that holds a single label.
            auc = "" if name.startswith(f"{LABEL_NAME_FEATURE}=") else f"  auc {values.get(AUC, float('nan')):.3f}"
            accuracy = ACCURACY if ACCURACY in values else SUBSET_ACCURACY  # multi-label: the exact label set
            change = self.slice_changes.get(name, {}).get(AUC)
            versus = f"  vs baseline {change[0]:+.3f} (95% {change[1]:+.3f} to {change[2]:+.3f})" if change else ""
            ungated = f"  not gated: {self.ungated_slices[name]}" if name in self.ungated_slices else ""
            lines.append(
                f"    {name:<24} n={int(values.get('example_count', 0)):<6} {accuracy.replace('_', ' ')} "
                f"{values.get(accuracy, float('nan')):.3f}{auc}{versus}{ungated}"
            )
        for label, values in self.per_class.items():
            shown = "  ".join(f"{k} {values[k]:.3f}" for k in ("auc", "precision", "recall", "f1") if k in values)
            lines.append(f"    class {label:<18} {shown}")
        if self.blessed is not None:
            baseline = self.baseline_uri or "none: the first blessed model of this task, judged on thresholds alone"
            lines.append(f"  baseline      {baseline}")
        if self.changes:
            lines.append(f"  vs baseline   {self.describe_changes()}")
        verdict = {True: "BLESSED", False: "NOT blessed", None: "not evaluated"}[self.blessed]
        lines.append(f"  blessing      {verdict}: {self.blessing_reason}")
        return lines

    def _output_lines(self) -> list[str]:
        """Where the model went: pushed, the Hugging Face folder, the Hub, the scored rows."""
        lines: list[str] = []
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
        return lines

    def _training_lines(self) -> list[str]:
        """The search, what training used and did, its speed and memory."""
        lines: list[str] = []
        if self.trials:
            lines.append(f"  tuning        {len(self.trials)} trial(s), best first (score: the eval split's objective)")
            lines.extend(f"    {describe_trial(trial)}" for trial in self.trials)
        if self.training and self.training.tuned:
            shown = describe_values(self.training.tuned)
            lines.append(f"  tuned         the Trainer trained with the best trial's {shown}")
        if self.training:
            if self.training.started_from:
                lines.append(f"  started from  {self.training.describe_start()}")
            if self.training.pooling:
                lines.append(f"  pooling       {self.training.pooling}")
            lines.append(f"  epochs        {self.training.describe_epochs()}")
            if self.training.chance:
                lines.append(f"  chance        {self.training.chance}")
            if self.training.more_accurate:
                lines.append(f"  most accurate {self.training.more_accurate}")
            lines.append(f"  class weights {self.training.describe_class_weights()}")
            if self.training.workers > 1:
                workers = self.training.workers
                lines.append(f"  workers       {workers} machines in lock-step (MultiWorkerMirroredStrategy)")
            if self.training.resumes:
                lines.append(f"  resumed       {self.training.describe_resumes()}")
        if self.throughput:
            lines.append(f"  training      {describe_throughput(self.throughput)}")
        if self.peak_rss_bytes:
            lines.append(f"  peak memory   {self.peak_rss_bytes / 2**30:.2f} GiB")
        return lines


def describe_trial(trial: dict[str, Any]) -> str:
    """`trial 03  score 0.4213  learning_rate 5e-05, batch_size 16`: one row of TFX's tuner_results."""
    values = describe_values({k: v for k, v in trial.items() if k not in ("trial_id", "score")})
    return f"trial {trial.get('trial_id')}  score {trial.get('score', float('nan')):.4f}  {values}"


def describe_throughput(throughput: dict[str, Any]) -> str:
    """The Trainer's rate as examples/s and as a share of this machine's matmul peak."""
    text = f"{rate_text(throughput['examples_per_second'])}, model {throughput['model_gflops_per_second']:.1f} GFLOP/s"
    if throughput.get("utilization") is not None:
        text += (
            f" = {throughput['utilization']:.0%} of this machine's {throughput['matmul_peak_dtype']} matmul peak "
            f"({throughput['matmul_peak_gflops']:.0f} GFLOP/s)"
        )
    text += f"; padding {throughput['padding_share']:.0%} of tokens"
    if throughput.get("padding_share_one_per_row") is not None:
        text += f" (texts packed in rows: {throughput['padding_share_one_per_row']:.0%} one text a row)"
    return text


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
