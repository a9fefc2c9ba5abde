"""What the Evaluator decided and measured, read back with TFMA's own loaders under this project's names.

Read by the run summary and report (pipeline/reporting) and by the model card of the HF publisher.
"""

from __future__ import annotations

from components.evaluator.module import metric_names, top1_precision_recall
from components.evaluator.noise_aware_gate import read_comparisons, slice_name


def _metric_value(value: dict) -> float | None:
    """A metric's point value, with or without an interval (TFMA's view shows one as a boundedValue)."""
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "boundedValue" in value:
        return float(value["boundedValue"].get("value", 0.0))
    return None


def _interval(value: dict) -> tuple[float, float] | None:
    bounded = value.get("boundedValue")
    if bounded is None:
        return None
    return float(bounded.get("lowerBound", 0.0)), float(bounded.get("upperBound", 0.0))


def view_slice_name(slice_key: tuple) -> str:
    """A slice of TFMA's loaded view ((column, value), ...) named as noise_aware_gate.slice_name names its proto."""
    return ", ".join(f"{column}={value}" for column, value in slice_key)


def load_eval_config(evaluation_uri: str):
    """The EvalConfig the Evaluator ran with, as TFMA wrote it (its own loader reads it back)."""
    from tensorflow_model_analysis.writers import eval_config_writer

    return eval_config_writer.load_eval_run(evaluation_uri)[0]


def evaluated_models(evaluation_uri: str) -> list[str]:
    """Model names in the evaluation: TFX names them candidate and baseline when a blessed baseline took part."""
    return [spec.name for spec in load_eval_config(evaluation_uri).model_specs if spec.name]


def load_eval_result(evaluation_uri: str, role: str = "candidate"):
    """TFMA's result for the candidate (or the baseline); None for a baseline that did not take part."""
    import tensorflow_model_analysis as tfma

    names = evaluated_models(evaluation_uri)
    if role in names:
        return tfma.load_eval_result(evaluation_uri, model_name=role)
    return tfma.load_eval_result(evaluation_uri) if role == "candidate" else None


def _metric_name(name: str) -> str:
    """TFMA's view names a macro-averaged metric '<AggregationType proto text>_<name>'; we call it <name>."""
    return name.rsplit("\n_", 1)[-1] if name.startswith("macro_average") else name


def read_metrics(
    evaluation_uri: str, label_names: list[str], role: str = "candidate", multi_label: bool = False
) -> tuple[dict[str, float], dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """(overall, per slice, per class) metrics under our names: for K classes the headline AUC and AUC-PR are
    macro averages of one-vs-rest ones, precision and recall macro averages of each class's top-1 ones; for
    multi-label models macro averages over labels, precision and recall at each label's decision threshold."""
    rename = metric_names(max(len(label_names), 2))
    result = load_eval_result(evaluation_uri, role)
    if result is None:
        return {}, {}, {}
    overall, slices, per_class = {}, {}, {}
    for slice_key, by_output in result.slicing_metrics:
        values = {}
        for sub_key, metrics in by_output.get("", {}).items():
            for name, value in metrics.items():
                number = _metric_value(value)
                # *_diff metrics (candidate minus baseline) are not the model's own; the baseline's are read apart.
                if number is None or name.endswith("_diff"):
                    continue
                if sub_key == "":
                    values[rename.get(_metric_name(name), _metric_name(name))] = number
                elif not slice_key and sub_key.startswith("classId:"):
                    class_id = int(sub_key.removeprefix("classId:"))
                    label = label_names[class_id] if class_id < len(label_names) else str(class_id)
                    per_class.setdefault(label, {})[name] = number
        if not slice_key:
            overall = values
        else:
            slices[view_slice_name(slice_key)] = values
    if multi_label:
        for name in ("precision", "recall"):
            overall[name] = sum(per_class.get(label, {}).get(name, 0.0) for label in label_names) / len(label_names)
    elif len(label_names) > 2:
        top1 = top1_precision_recall(multiclass_confusion_matrix(result), label_names)
        for label, values in top1.items():
            per_class.setdefault(label, {}).update(values)
        for name in ("precision", "recall"):
            overall[name] = sum(values[name] for values in top1.values()) / len(top1)
    return overall, dict(sorted(slices.items())), per_class


def read_slice_intervals(
    evaluation_uri: str, label_names: list[str]
) -> dict[str, tuple[dict[str, tuple[float, float]], dict[str, tuple[float, float, float]]]]:
    """Per slice ('' the whole test split, else as read_metrics names it), the candidate's 95% intervals where TFMA
    computed them (evaluation.confidence_intervals): ({metric: (lower, upper)}, {metric: (change vs. the baseline,
    lower, upper)}), under our names."""
    rename = metric_names(max(len(label_names), 2))
    result = load_eval_result(evaluation_uri)
    found = {}
    for slice_key, by_output in result.slicing_metrics:
        own, changes = {}, {}
        for name, value in by_output.get("", {}).get("", {}).items():
            interval = _interval(value)
            if interval is None:
                continue
            ours = _metric_name(name.removesuffix("_diff"))
            ours = rename.get(ours, ours)
            if name.endswith("_diff"):
                changes[ours] = (_metric_value(value), *interval)
            else:
                own[ours] = interval
        found[view_slice_name(slice_key)] = (own, changes)
    return found


def read_intervals(
    evaluation_uri: str, label_names: list[str]
) -> tuple[dict[str, tuple[float, float]], dict[str, tuple[float, float, float]]]:
    """The whole test split's intervals and changes (read_slice_intervals' '' slice)."""
    return read_slice_intervals(evaluation_uri, label_names).get("", ({}, {}))


def multiclass_confusion_matrix(result) -> dict:
    """TFMA's K x K confusion matrix of top-1 predictions over the whole test split ({} if not computed)."""
    plots = dict(result.plots)
    overall = plots.get((), {}).get("", {}).get("", {})
    matrices = overall.get("multiClassConfusionMatrixAtThresholds", {}).get("matrices", [{}])
    return matrices[0] if matrices else {}


def describe_failure(failure) -> str:
    import tensorflow_model_analysis as tfma

    name = failure.metric_key.name
    if failure.metric_key.is_diff:
        name += " change vs. the blessed baseline"
    value = failure.metric_value.double_value.value
    threshold = failure.metric_threshold
    bounds = []
    if threshold.HasField("value_threshold"):
        bound = threshold.value_threshold
        if bound.HasField("lower_bound"):
            bounds.append(f"needs >= {bound.lower_bound.value:.4g}")
        if bound.HasField("upper_bound"):
            bounds.append(f"needs <= {bound.upper_bound.value:.4g}")
    if threshold.HasField("change_threshold"):
        change = threshold.change_threshold
        higher = change.direction != tfma.MetricDirection.LOWER_IS_BETTER
        for kind in ("absolute", "relative"):
            if change.HasField(kind):
                limit = getattr(change, kind).value
                shown = 0.0 if abs(limit) < 1e-6 else limit  # TFMA's "no regression" bound is -1e-10
                bounds.append(f"needs {kind} change {'>=' if higher else '<='} {shown:.4g}")
    if failure.message and bounds:
        bounds.append(failure.message)  # the noise-aware gate's interval (components/evaluator/noise_aware_gate.py)
    return f"{name} {value:.4f} ({', '.join(bounds) or failure.message})"


def blessing_reason(evaluation_uri: str, blessed: bool) -> str:
    import tensorflow_model_analysis as tfma

    result = tfma.load_validation_result(evaluation_uri)
    if result.validation_ok:
        if not blessed:
            return "thresholds met, but the Evaluator did not bless the model"
        within = [c.describe() for c in read_comparisons(evaluation_uri) if c.within_noise]
        return "; ".join(["every threshold met", *within])
    failures = []
    for per_slice in result.metric_validations_per_slice:
        where = slice_name(per_slice.slice_key)
        for failure in per_slice.failures:
            failures.append(describe_failure(failure) + (f" on slice {where}" if where else ""))
    if result.missing_thresholds:
        failures.append(f"{len(result.missing_thresholds)} metric(s) with thresholds were not computed")
    return "; ".join(failures) or "validation failed"
