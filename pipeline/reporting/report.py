"""`hftfx report`: one self-contained HTML page about a run, built from its artifacts in ML Metadata.

Sections: dataset and splits, data statistics and anomalies, training curves (TensorBoard logs), evaluation
overall and per slice, ROC and precision-recall curves, confusion matrix, calibration, the blessing decision
with its thresholds and the baseline, and what was pushed. Plots are PNGs embedded in the page.
"""

from __future__ import annotations

import glob
import html
import json
import os
from pathlib import Path

import matplotlib.pyplot as plt

from components.evaluator.class_metrics import PER_CLASS
from components.evaluator.eval_results import load_eval_config, load_eval_result, multiclass_confusion_matrix
from components.evaluator.metric_names import SUBSET_ACCURACY
from components.evaluator.module import confusion_cells
from components.trainer.training_record import describe_values
from components.transform.tokenization_stats import tokenization_figures
from models.names import LABEL_NAME_FEATURE, LENGTH_BUCKET, TEXT_FEATURE
from models.task import MULTI_LABEL
from pipeline.config.node_ids import TRANSFORMED_STATISTICS_GEN
from pipeline.config.pipeline_config import ConfigError, PipelineConfig
from pipeline.reporting.html_page import png, table, write_page
from pipeline.reporting.metadata_reader import latest_run_context, node_name, open_store, output_artifacts, summarize
from pipeline.reporting.run_summary import RunSummary

SECTIONS = ("summary", "dataset", "statistics", "training", "evaluation", "curves", "blessing", "push")


def _run_artifacts(store, pipeline_name: str) -> dict[str, object]:
    """Output artifacts of the latest run, by output key; cached executions list the artifacts they reused."""
    run = latest_run_context(store, pipeline_name)
    found = {}
    for execution in store.get_executions_by_context(run.id):
        outputs = output_artifacts(store, execution)
        if node_name(store, execution, pipeline_name) == TRANSFORMED_STATISTICS_GEN:
            outputs = {f"transformed_{key}": artifact for key, artifact in outputs.items()}
        found.update(outputs)
    return found


def _statistics_section(artifacts) -> str:
    import tensorflow_data_validation as tfdv

    parts = []
    statistics = artifacts.get("statistics")
    if statistics is not None:
        rows = []
        for path in sorted(glob.glob(os.path.join(statistics.uri, "Split-*", "FeatureStats.pb"))):
            split = Path(path).parent.name.removeprefix("Split-")
            dataset = tfdv.load_stats_binary(path).datasets[0]
            features = {f.path.step[0]: f for f in dataset.features}
            text = features.get(TEXT_FEATURE)
            labels = features.get(LABEL_NAME_FEATURE)
            counts = ""
            if labels is not None:
                top = labels.string_stats.top_values
                counts = ", ".join(f"{v.value} {int(v.frequency)}" for v in top)
            avg = f"{text.string_stats.avg_length:.0f}" if text is not None else "-"
            rows.append([split, dataset.num_examples, avg, counts])
        parts.append(table(["split", "examples", "mean text length (chars)", "labels"], rows))
    anomalies = artifacts.get("anomalies")
    if anomalies is not None:
        from tfx.types import artifact_utils

        from components.example_validator.executor import describe_anomalies, load_anomalies

        splits = artifact_utils.decode_split_names(anomalies.properties["split_names"].string_value)
        problems = describe_anomalies(load_anomalies(anomalies.uri, splits))
        parts.append("<p><b>Anomalies:</b> " + (html.escape("; ".join(problems)) if problems else "none") + "</p>")
    transformed = artifacts.get("transformed_statistics")
    paths = glob.glob(os.path.join(transformed.uri, "Split-train", "FeatureStats.pb")) if transformed else []
    if paths:
        parts.append(f"<p><b>After tokenization (train):</b> {html.escape(tokenization_summary(paths[0]))}.</p>")
    return "".join(parts) or "<p>No statistics recorded.</p>"


def tokenization_summary(feature_stats_path: str) -> str:
    """Truncation, token counts and [UNK]s of one split, from the statistics of the transformed examples."""
    return tokenization_figures(feature_stats_path).describe()


def training_series(model_run_uri: str) -> dict[str, list[tuple[int, float]]]:
    """ "<phase>/<tag>" -> (step, value) of the Trainer's TensorBoard logs, read by TensorBoard's own loader."""
    import tensorflow as tf
    from tensorboard.backend.event_processing import event_accumulator

    series: dict[str, list[tuple[int, float]]] = {}
    for phase in sorted(p for p in Path(model_run_uri, "logs").glob("*") if p.is_dir()):
        logs = event_accumulator.EventAccumulator(str(phase), size_guidance={event_accumulator.TENSORS: 0})
        logs.Reload()
        for tag in logs.Tags()[event_accumulator.TENSORS]:
            points = [(e.step, float(tf.make_ndarray(e.tensor_proto))) for e in logs.Tensors(tag)]
            series[f"{phase.name}/{tag}"] = points
    return series


def _training_section(artifacts) -> str:
    model_run = artifacts.get("model_run")
    if model_run is None:
        return "<p>No training logs.</p>"
    series = training_series(model_run.uri)
    figure, axes = plt.subplots(1, 2, figsize=(10, 3.2))
    for axis, metric in zip(axes, ("loss", "accuracy"), strict=True):
        points = sorted(series.get(f"train/batch_{metric}", []))
        if points:
            axis.plot([p[0] for p in points], [p[1] for p in points], marker=".", label="train (running)")
        validation = series.get(f"validation/evaluation_{metric}_vs_iterations", [])
        if validation:
            axis.scatter(
                [p[0] for p in validation], [p[1] for p in validation], color="C3", label="eval split", zorder=3
            )
        axis.set_xlabel("step")
        axis.set_title(metric)
        axis.grid(alpha=0.3)
        axis.legend()
    return png(figure)


def _trialstable(summary: RunSummary) -> str:
    """The Tuner's trials, best first, and what the Trainer took from the best ('' without a Tuner)."""
    if not summary.trials:
        return ""
    keys = [k for k in summary.trials[0] if k not in ("trial_id", "score")]
    rows = [
        [t.get("trial_id"), f"{t.get('score', float('nan')):.4f}", *(f"{t.get(k)}" for k in keys)]
        for t in summary.trials
    ]
    tuned = summary.training.tuned if summary.training else None
    taken = f" The Trainer trained with its values: {html.escape(describe_values(tuned))}." if tuned else ""
    return (
        f"<p>The Tuner's {len(rows)} trial(s), best first; score: the eval split's objective at each trial's best "
        f"epoch.{taken}</p>" + table(["trial", "score", *keys], rows)
    )


def _evaluation_sections(evaluation_uri: str, summary: RunSummary) -> tuple[str, str]:
    """(the metrics tables, the curves) of the Evaluator's result."""
    metrics_html = _metrics_tables(summary) + _slices_against_baseline(summary)
    result = load_eval_result(evaluation_uri)
    by_sub_key = dict(result.plots or []).get((), {}).get("", {})
    if summary.task == MULTI_LABEL:
        figure, axis = plt.subplots(figsize=(6, 4.5))
        _roc_per_class(axis, by_sub_key, summary, "ROC per label")
        caption = "<p>The ROC of each label: its probability against whether the row carries it.</p>"
        return metrics_html, caption + png(figure)
    if len(summary.label_names) > 2:
        return metrics_html, _multiclass_figure(multiclass_confusion_matrix(result), by_sub_key, summary)
    return metrics_html, _binary_curves(by_sub_key.get("", {}), summary)


def _metrics_tables(summary: RunSummary) -> str:
    """Overall and per-slice metrics; per class when there are per-class figures."""
    multi_label = summary.task == MULTI_LABEL
    # Multi-label: the share of rows whose whole label set is right stands where accuracy stands.
    accuracy = SUBSET_ACCURACY if multi_label else "accuracy"
    rows = [
        [
            "overall",
            *[summary.with_interval(k) for k in (accuracy, "auc", "auc_pr", "precision", "recall")],
            int(summary.metrics.get("example_count", 0)),
        ]
    ]
    label_slices = False
    for name, values in summary.slices.items():
        # On a slice holding one label, AUCs are undefined and a binary model's precision and recall read 1, 0 or
        # nan whatever it does; accuracy there is that label's recall, which means something.
        single_label = name.startswith(f"{LABEL_NAME_FEATURE}=")
        hidden = ("auc", "auc_pr", *(() if multi_label else ("precision", "recall"))) if single_label else ()
        label_slices |= single_label and not multi_label
        cells = [
            ("n/a" if k in hidden else f"{values.get(k, float('nan')):.4f}")
            for k in (accuracy, "auc", "auc_pr", "precision", "recall")
        ]
        rows.append([name, *cells, int(values.get("example_count", 0))])
    headers = ["slice", accuracy.replace("_", " "), "AUC", "AUC-PR", "precision", "recall", "examples"]
    metrics_html = table(headers, rows)
    if summary.intervals:
        metrics_html += (
            "<p>In parentheses: the 95% interval of the whole test split's metric (TFMA's jackknife over 20 "
            "partitions of the test examples).</p>"
        )
    if label_slices:
        metrics_html += (
            "<p>On a label's slice, accuracy is that label's recall; AUC, precision and recall need both labels "
            "and are shown overall (and per class below, when there are more than two).</p>"
        )
    if summary.per_class:
        answered = "at each label's decision threshold" if multi_label else "of the served answer"
        metrics_html += (
            f"<p>Per class: AUC and AUC-PR one-vs-rest, precision, recall and F1 {answered} (the headline ones "
            "are their unweighted means):</p>"
            + table(
                ["class", "AUC", "AUC-PR", "precision", "recall", "F1"],
                [
                    [name, *(f"{values.get(k, float('nan')):.4f}" for k in ("auc", "auc_pr", *PER_CLASS))]
                    for name, values in summary.per_class.items()
                ],
            )
        )
    return metrics_html


def _slices_against_baseline(summary: RunSummary) -> str:
    """Each slice's AUC, the baseline's, the change with its paired 95% interval, and what the gate made of it: the
    slices that refused the blessing first, then the others by change; a plot of the changes and intervals."""
    verdicts = {c.slice: c for c in summary.slice_verdicts}
    names = [n for n in summary.slice_changes if "auc" in summary.slice_changes[n]]
    if not names:
        return ""

    def order(name: str) -> tuple:
        refused = name in verdicts and not verdicts[name].within_noise
        return (not refused, summary.slice_changes[name]["auc"][0])

    names.sort(key=order)
    rows = []
    for name in names:
        change, low, high = summary.slice_changes[name]["auc"]
        if name in summary.ungated_slices:
            verdict = f"not gated: {summary.ungated_slices[name]}"
        elif name in verdicts:
            verdict = "refused the blessing" if not verdicts[name].within_noise else "within the noise"
        else:
            verdict = "passed" if name.split("=")[0] not in (LABEL_NAME_FEATURE, LENGTH_BUCKET) else "read, not gated"
        candidate = summary.slices.get(name, {}).get("auc", float("nan"))
        baseline = summary.baseline_slices.get(name, {}).get("auc", float("nan"))
        examples = int(summary.slices.get(name, {}).get("example_count", 0))
        rows.append(
            [
                name,
                examples,
                f"{candidate:.4f}",
                f"{baseline:.4f}",
                f"{change:+.4f} ({low:+.4f} to {high:+.4f})",
                verdict,
            ]
        )
    slices = table(["slice", "examples", "AUC", "baseline AUC", "change (95% paired)", "gate"], rows)
    figure, axis = plt.subplots(figsize=(7, 0.35 * len(names) + 1.2))
    changes = [summary.slice_changes[n]["auc"] for n in names]
    positions = list(range(len(names)))[::-1]
    colours = ["tab:red" if n in verdicts and not verdicts[n].within_noise else "tab:blue" for n in names]
    for y, (change, low, high), colour in zip(positions, changes, colours, strict=True):
        axis.errorbar(change, y, xerr=[[change - low], [high - change]], fmt="o", color=colour, capsize=3)
    axis.axvline(0, color="grey", linestyle="--")
    axis.set(yticks=positions, yticklabels=names, xlabel="AUC change vs the blessed baseline (95% paired interval)")
    return (
        "<p><b>Per slice against the blessed baseline</b> (the slices that refused the blessing first, in red):</p>"
        + slices
        + png(figure)
    )


def _binary_curves(overall: dict, summary: RunSummary) -> str:
    """ROC, precision-recall, the confusion matrix at 0.5 and calibration of a binary model."""
    matrices = overall.get("confusionMatrixAtThresholds", {}).get("matrices", [])
    if not matrices:
        return "<p>No curves recorded.</p>"
    fpr = [m.get("falsePositiveRate", 0.0) for m in matrices]
    tpr = [m.get("recall", 0.0) for m in matrices]
    precision = [m.get("precision", 1.0) if m.get("precision") != "NaN" else 1.0 for m in matrices]
    figure, axes = plt.subplots(1, 4, figsize=(16, 3.6))
    axes[0].plot(fpr, tpr)
    axes[0].plot([0, 1], [0, 1], linestyle="--", color="grey")
    axes[0].set(
        title=f"ROC (AUC {summary.metrics.get('auc', float('nan')):.3f})",
        xlabel="false positive rate",
        ylabel="true positive rate",
    )
    axes[1].plot(tpr, precision)
    axes[1].set(
        title=f"precision-recall (AUC {summary.metrics.get('auc_pr', float('nan')):.3f})",
        xlabel="recall",
        ylabel="precision",
    )
    _confusion_at_half(axes[2], matrices, summary.label_names or ["0", "1"])
    _calibration(axes[3], overall)
    for axis in axes[[0, 1, 3]]:
        axis.grid(alpha=0.3)
    return png(figure)


def _confusion_at_half(axis, matrices: list[dict], names: list[str]) -> None:
    import numpy as np

    at_half = min(matrices, key=lambda m: abs(m.get("threshold", 0) - 0.5))
    cells = np.array(
        [
            [at_half.get("trueNegatives", 0), at_half.get("falsePositives", 0)],
            [at_half.get("falseNegatives", 0), at_half.get("truePositives", 0)],
        ]
    )
    axis.imshow(cells, cmap="Blues")
    for (i, j), value in np.ndenumerate(cells):
        axis.text(j, i, f"{int(value)}", ha="center", va="center", fontsize=12)
    axis.set(
        title="confusion matrix at 0.5",
        xticks=[0, 1],
        yticks=[0, 1],
        xticklabels=names,
        yticklabels=names,
        xlabel="predicted",
        ylabel="true",
    )


def _calibration(axis, overall: dict) -> None:
    """Mean predicted score against the observed positive share, over ten score buckets."""
    import numpy as np

    buckets = overall.get("calibrationHistogramBuckets", {}).get("buckets", [])
    edges = np.linspace(0, 1, 11)
    predicted, observed, counts = np.zeros(10), np.zeros(10), np.zeros(10)
    for bucket in buckets:
        n = bucket.get("numWeightedExamples", 0.0)
        if not n:
            continue
        mean_prediction = bucket.get("totalWeightedRefinedPrediction", 0.0) / n
        index = min(int(np.searchsorted(edges, mean_prediction, side="right")) - 1, 9)
        predicted[index] += bucket.get("totalWeightedRefinedPrediction", 0.0)
        observed[index] += bucket.get("totalWeightedLabel", 0.0)
        counts[index] += n
    filled = counts > 0
    axis.plot([0, 1], [0, 1], linestyle="--", color="grey")
    axis.plot(predicted[filled] / counts[filled], observed[filled] / counts[filled], marker="o")
    axis.set(title="calibration", xlabel="mean predicted score", ylabel="fraction positive")


def _multiclass_figure(matrix: dict, by_sub_key: dict, summary: RunSummary) -> str:
    """K classes: the K x K confusion matrix (top-1 predictions) and each class's one-vs-rest ROC."""
    import numpy as np

    names = summary.label_names
    k = len(names)
    cells = np.array(confusion_cells(matrix, k))
    figure, axes = plt.subplots(1, 2, figsize=(6 + 1.2 * k, 4 + 0.4 * k))
    axes[0].imshow(cells, cmap="Blues")
    for (i, j), value in np.ndenumerate(cells):
        axes[0].text(j, i, f"{int(value)}", ha="center", va="center", fontsize=11)
    axes[0].set(
        title=f"confusion matrix ({k} classes)",
        xticks=range(k),
        yticks=range(k),
        xlabel="predicted",
        ylabel="true",
    )
    axes[0].set_xticklabels(names, rotation=30, ha="right")
    axes[0].set_yticklabels(names)
    _roc_per_class(axes[1], by_sub_key, summary, "one-vs-rest ROC per class")
    figure.tight_layout()
    caption = f"<p>The confusion matrix ({k} classes) of top-1 predictions, and the one-vs-rest ROC of each class.</p>"
    return caption + png(figure)


def _roc_per_class(axis, by_sub_key: dict, summary: RunSummary, title: str) -> None:
    """Each class's (or label's) ROC from TFMA's binarized confusion matrices, its AUC in the legend."""
    for class_id, name in enumerate(summary.label_names):
        curve = by_sub_key.get(f"classId:{class_id}", {}).get("confusionMatrixAtThresholds", {}).get("matrices", [])
        if curve:
            auc = summary.per_class.get(name, {}).get("auc", float("nan"))
            axis.plot(
                [m.get("falsePositiveRate", 0.0) for m in curve],
                [m.get("recall", 0.0) for m in curve],
                label=f"{name} (AUC {auc:.3f})",
            )
    axis.plot([0, 1], [0, 1], linestyle="--", color="grey")
    axis.set(title=title, xlabel="false positive rate", ylabel="true positive rate")
    axis.legend(fontsize=8)
    axis.grid(alpha=0.3)


def _blessing_section(evaluation_uri: str, summary: RunSummary) -> str:
    rows = []
    for spec in load_eval_config(evaluation_uri).metrics_specs:
        for metric in spec.metrics:
            for per_slice in metric.per_slice_thresholds:
                value, change = per_slice.threshold.value_threshold, per_slice.threshold.change_threshold
                rows.append(
                    [
                        metric.class_name,
                        f"{value.lower_bound.value:g}" if value.HasField("lower_bound") else "-",
                        f"a loss of at most {max(0.0, -change.absolute.value):.2g} beyond the test split's noise"
                        if change.HasField("absolute")
                        else "-",
                    ]
                )
    if summary.baseline_metrics:
        shown = ", ".join(
            f"{k} {summary.baseline_metrics[k]:.4f}" for k in ("accuracy", "auc") if k in summary.baseline_metrics
        )
        baseline = f"the latest blessed model took part as the baseline ({shown} on this test split)"
        if summary.changes:
            baseline += f". Candidate minus baseline on the same examples: {summary.describe_changes()}"
    else:
        baseline = "no blessed baseline yet: only the absolute bounds applied"
    verdict = {True: "BLESSED", False: "NOT BLESSED", None: "not evaluated"}[summary.blessed]
    return (
        f'<p class="verdict {str(summary.blessed).lower()}">{verdict}: {html.escape(summary.blessing_reason)}</p>'
        + table(["metric", "lower bound", "against the baseline"], rows)
        + f"<p>{baseline}.</p>"
    )


def _lengths_list(lengths: str) -> str:
    """The preflight's length choices (token lengths, width, windows, buckets), one per line."""
    parts = [part for part in lengths.removeprefix("lengths: ").split("; ") if part]
    if not parts:
        return ""
    items = "".join(f"<li>{html.escape(part)}</li>" for part in parts)
    return f"<p>Text lengths, in the model's tokens, and what the run chose from them:</p><ul>{items}</ul>"


def _dataset_section(summary: RunSummary) -> str:
    """The splits with what was dropped, the label order, the spans read and the token lengths."""
    spans = (
        f"<p>Span {summary.span}; spans read: {', '.join(map(str, summary.spans))}</p>"
        if summary.spans and summary.spans != [0]
        else ""
    )
    return (
        table(
            ["split", "examples", "dropped (missing text or label)"],
            [[k, v, summary.dropped_counts.get(k, 0)] for k, v in summary.split_counts.items()],
        )
        + f"<p>Labels (id order): {html.escape(', '.join(summary.label_names))}</p>"
        + spans
        + _lengths_list(summary.lengths)
    )


def build_report(sqlite_path: str, pipeline_name: str, output: str | Path, summary: RunSummary | None = None) -> Path:
    """The latest run's HTML page; `summary` is that run's, when the caller already read it from ML Metadata."""
    summary = summary or summarize(sqlite_path, pipeline_name)
    if summary is None:
        raise FileNotFoundError(f"no run of '{pipeline_name}' is recorded in {sqlite_path}")
    store = open_store(sqlite_path)
    artifacts = _run_artifacts(store, pipeline_name)
    evaluation = artifacts.get("evaluation")
    metrics_html, curves_html = (
        _evaluation_sections(evaluation.uri, summary)
        if evaluation is not None
        else ("<p>The Evaluator did not run.</p>", "")
    )
    body = {
        "summary": f"<p>Run <b>{html.escape(summary.run_id)}</b> of <b>{html.escape(pipeline_name)}</b>.</p>"
        + table(
            ["component", "state", "seconds"], [[c.name, c.state, f"{c.seconds:.1f}"] for c in summary.components]
        ),
        "dataset": _dataset_section(summary),
        "statistics": _statistics_section(artifacts),
        "training": _trialstable(summary) + _training_section(artifacts),
        "evaluation": metrics_html,
        "curves": curves_html,
        "blessing": _blessing_section(evaluation.uri, summary) if evaluation is not None else "",
        "push": f"<p>{html.escape(summary.pushed_dir)} (version {summary.pushed_version})</p>"
        if summary.pushed_dir
        else "<p>Nothing pushed.</p>",
    }
    titles = {
        "summary": "Run",
        "dataset": "Dataset and splits",
        "statistics": "Data statistics and anomalies",
        "training": "Training curves",
        "evaluation": "Evaluation on the test split",
        "curves": "ROC, precision-recall, confusion matrix, calibration",
        "blessing": "Blessing decision",
        "push": "Pushed model",
    }
    sections = {key: (titles[key], body[key]) for key in SECTIONS}
    return write_page(output, f"{pipeline_name}: run report", sections)


def run_report_path(config: PipelineConfig, run_id: str) -> Path:
    """<pipeline_root>/reports/<run id>.html, the run id made file-name safe."""
    name = "".join(c if c.isalnum() else "-" for c in run_id)
    return Path(config.pipeline_root) / "reports" / f"{name}.html"


def run_summary_json_path(config: PipelineConfig, run_id: str) -> Path:
    """The run's summary as JSON beside its page: the figures ML Metadata does not hold (wall time, peak
    memory) that `make bench` reads."""
    return run_report_path(config, run_id).with_suffix(".json")


def write_run_report(config: PipelineConfig, summary: RunSummary) -> Path:
    """The run's page, and its summary as JSON beside it."""
    report = build_report(
        config.metadata_sqlite, config.pipeline_name, run_report_path(config, summary.run_id), summary
    )
    run_summary_json_path(config, summary.run_id).write_text(
        json.dumps(summary.to_json(), indent=2) + "\n", encoding="utf-8"
    )
    return report


def write_latest_report(config: PipelineConfig, output: str | Path | None = None) -> Path:
    """`hftfx report`: the latest run's page, at `output` or beside the other run reports."""
    summary = summarize(config.metadata_sqlite, config.pipeline_name)
    if summary is None:
        raise ConfigError(f"no run of '{config.pipeline_name}' under {config.pipeline_root}; run one first")
    output = output or run_report_path(config, summary.run_id)
    return build_report(config.metadata_sqlite, config.pipeline_name, output, summary)
