"""A retrain is refused for a regression beyond the test split's noise, not for any lower number.

TFMA's validator compares point values: with `max_auc_regression: 0` a retrain of equal quality scores below the
blessed model on the same test split about half the time (the default run's AUC moves by ±0.003 over training
seeds) and is refused at random. TFMA also computes each metric's 95% confidence interval, by the jackknife over
20 partitions of the test examples; for a change metric (candidate minus baseline) both models are scored on the
same partitions, so its interval is paired: what the two models' difference on these examples is worth. Here a
change-threshold failure whose interval still reaches the allowed change is within the noise and dropped; one
whose whole interval lies beyond it stays, its interval named. The blessing follows.

Intervals cost Evaluator time (about 7 s per slice over 1,282 examples on a 2-core machine), so
`evaluation.confidence_intervals: auto` computes them when a baseline takes part, where the gate needs them.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any

COMPARISON_FILE = "baseline_comparison.json"  # beside TFMA's output: what the gate made of each change
# A test split supports the gate when a 95% interval on its accuracy is at most ±0.05 wide at worst (p = 0.5:
# 1.96 x sqrt(0.25 / n) <= 0.05 from 385 examples) and each label has 30 examples for its share of the AUC.
MIN_TEST_EXAMPLES = 385
MIN_TEST_PER_LABEL = 30


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One change threshold judged with its interval, on the whole test split or one slice of it."""

    metric: str
    change: float  # candidate minus baseline
    lower: float
    upper: float
    allowed: float  # the threshold's absolute change (higher is better: the change must reach it)
    within_noise: bool
    slice: str = ""  # '' for the whole test split, else e.g. 'language=de'

    def describe(self) -> str:
        interval = f"95% interval [{self.lower:+.4f}, {self.upper:+.4f}]"
        allowed = f"{self.allowed:+.4g}" if abs(self.allowed) >= 1e-6 else "0"
        if self.within_noise:
            where = f" on slice {self.slice}" if self.slice else ""
            return (
                f"{self.metric} change vs. the blessed baseline{where} {self.change:+.4f} is within the test split's "
                f"noise ({interval} reaches the allowed {allowed})"
            )
        return f"{interval}: worse than the allowed {allowed} beyond the test split's noise"


@dataclasses.dataclass(frozen=True)
class Ungated:
    """A gated column's slice the gate did not judge, and why (reported all the same)."""

    slice: str
    reason: str


def slice_name(slice_key) -> str:
    """A SliceKey proto as the reports name slices: 'language=de, source=web'; '' for the whole test split."""
    parts = []
    for key in slice_key.single_slice_keys:
        kind = key.WhichOneof("kind")
        value = key.bytes_value.decode("utf-8", "replace") if kind == "bytes_value" else getattr(key, kind)
        parts.append(f"{key.column}={value}")
    return ", ".join(parts)


def small_test_split(label_counts: dict[str, int], total: int) -> str | None:
    """What a test split of `total` examples ({label: count}) is too small for, with the fix; None if enough."""
    rare = {label: n for label, n in label_counts.items() if n < MIN_TEST_PER_LABEL}
    if total >= MIN_TEST_EXAMPLES and not rare:
        return None
    half = 1.96 * math.sqrt(0.25 / max(1, total))
    problem = f"the test split holds {total:,} examples: a 95% interval on its accuracy is up to ±{half:.2f} wide"
    if rare:
        problem += f"; {', '.join(f'{k} {v}' for k, v in sorted(rare.items()))} (fewer than {MIN_TEST_PER_LABEL})"
    return (
        f"{problem}, so its metrics and the comparison with the blessed model tell apart only models that differ by "
        f"more: give it at least {MIN_TEST_EXAMPLES} examples and {MIN_TEST_PER_LABEL} of each label "
        "(dataset.split_ratios, dataset.limits.test, or more data)"
    )


def with_intervals_where_compared(eval_config_json: str, has_baseline: bool) -> str:
    """The Evaluator's EvalConfig (TFX passes it as JSON) computing intervals when the config leaves them to the
    run (`compute_confidence_intervals` unset: evaluation.confidence_intervals auto) and a baseline takes part."""
    from google.protobuf import json_format
    from tensorflow_model_analysis.proto import config_pb2

    config = json_format.Parse(eval_config_json, config_pb2.EvalConfig())
    if config.options.HasField("compute_confidence_intervals"):
        return eval_config_json
    config.options.compute_confidence_intervals.value = has_baseline
    return json_format.MessageToJson(config)


Intervals = dict[tuple[str, bytes], tuple[float, float, float]]  # (slice name, MetricKey) -> value, lower, upper


def metric_intervals(output_uri: str) -> Intervals:
    """{(slice name, serialized MetricKey): (value, lower, upper)} of every slice's metrics that carry an interval
    ('' names the whole test split)."""
    from tensorflow_model_analysis.writers import metrics_plots_and_validations_writer as writer

    intervals = {}
    for metrics in writer.load_and_deserialize_metrics(output_uri):
        where = slice_name(metrics.slice_key)
        for entry in metrics.metric_keys_and_values:
            interval = entry.confidence_interval
            if interval.HasField("lower_bound") and entry.value.HasField("double_value"):
                bounds = (interval.lower_bound.double_value.value, interval.upper_bound.double_value.value)
                key = (where, entry.key.SerializeToString(deterministic=True))
                intervals[key] = (entry.value.double_value.value, *bounds)
    return intervals


def _judge(failure, intervals: Intervals, where: str) -> Comparison | None:
    """The failure's change judged with its interval; None when it is not a higher-is-better absolute change
    threshold on a metric with an interval (left as TFMA decided)."""
    from tensorflow_model_analysis.proto import config_pb2

    change = failure.metric_threshold.change_threshold
    higher = change.direction == config_pb2.MetricDirection.HIGHER_IS_BETTER
    known = intervals.get((where, failure.metric_key.SerializeToString(deterministic=True)))
    if not (failure.metric_key.is_diff and change.HasField("absolute") and higher and known):
        return None
    value, lower, upper = known
    allowed = change.absolute.value
    return Comparison(failure.metric_key.name, value, lower, upper, allowed, upper >= allowed, where)


def _ungated(failures, where: str) -> Ungated | None:
    """Why a user slice is not gated: fewer test examples than evaluation.min_slice_examples (its ExampleCount
    bound failed), or a change that is not a number (AUC is undefined on a slice holding one label)."""
    for failure in failures:
        if failure.metric_key.name == "example_count" and not failure.metric_key.is_diff:
            bound = failure.metric_threshold.value_threshold.lower_bound.value
            examples = failure.metric_value.double_value.value
            return Ungated(where, f"{examples:.0f} test examples, fewer than the {bound:.0f} a gated slice needs")
    for failure in failures:
        if failure.metric_key.is_diff and math.isnan(failure.metric_value.double_value.value):
            return Ungated(where, f"{failure.metric_key.name} is undefined on it (one label, or no baseline value)")
    return None


def rejudge(result, intervals: Intervals) -> tuple[Any, list[Comparison], list[Ungated]]:
    """TFMA's ValidationResult without the change failures that are within the noise (the others name their
    interval in their message) and without the failures of slices too small or undefined to gate,
    validation_ok recomputed as TFMA computes it; each change judged, each slice left ungated."""
    judged = type(result)()
    judged.CopyFrom(result)
    comparisons, ungated = [], []
    for per_slice in judged.metric_validations_per_slice:
        where = slice_name(per_slice.slice_key)
        skipped = _ungated(per_slice.failures, where) if where else None
        kept = []
        for failure in [] if skipped else per_slice.failures:
            comparison = _judge(failure, intervals, where)
            if comparison is not None:
                comparisons.append(comparison)
                if comparison.within_noise:
                    continue
                failure.message = comparison.describe()
            kept.append(failure)
        if skipped:
            ungated.append(skipped)
        del per_slice.failures[:]
        per_slice.failures.extend(kept)
    still_failing = [s for s in judged.metric_validations_per_slice if s.failures]
    del judged.metric_validations_per_slice[:]
    judged.metric_validations_per_slice.extend(still_failing)
    missing = judged.missing_slices or judged.missing_cross_slices or judged.missing_thresholds
    judged.validation_ok = judged.rubber_stamp or not (still_failing or missing)
    return judged, comparisons, ungated


def write_validation(output_uri: str, result) -> None:
    """Replaces TFMA's validations record with `result`, where TFMA's own loader reads it."""
    import tensorflow as tf
    from tensorflow_model_analysis import constants

    (path,) = tf.io.gfile.glob(os.path.join(output_uri, constants.VALIDATIONS_KEY) + "*")
    with tf.io.TFRecordWriter(path) as records:
        records.write(result.SerializeToString())


def _read_gate(output_uri: str) -> dict:
    import tensorflow as tf

    path = os.path.join(output_uri, COMPARISON_FILE)
    if not tf.io.gfile.exists(path):
        return {}
    with tf.io.gfile.GFile(path) as handle:
        found = json.load(handle)
    return {"comparisons": found} if isinstance(found, list) else found  # a list: written before slices were gated


def read_comparisons(output_uri: str) -> list[Comparison]:
    return [Comparison(**entry) for entry in _read_gate(output_uri).get("comparisons", [])]


def read_ungated(output_uri: str) -> list[Ungated]:
    return [Ungated(**entry) for entry in _read_gate(output_uri).get("ungated", [])]


def gate_with_noise(output_uri: str) -> bool | None:
    """Re-decides TFMA's validation under `output_uri` with the intervals it computed: writes the result back
    and each comparison (and each slice left ungated) beside it. Returns the new validation_ok, or None when
    nothing was compared or left ungated."""
    import tensorflow as tf
    import tensorflow_model_analysis as tfma

    validation = tfma.load_validation_result(output_uri)
    if validation.validation_ok:
        return None  # nothing failed: nothing to re-judge
    judged, comparisons, ungated = rejudge(validation, metric_intervals(output_uri))
    if not (comparisons or ungated):
        return None
    write_validation(output_uri, judged)
    record = {
        "comparisons": [dataclasses.asdict(c) for c in comparisons],
        "ungated": [dataclasses.asdict(u) for u in ungated],
    }
    with tf.io.gfile.GFile(os.path.join(output_uri, COMPARISON_FILE), "w") as handle:
        handle.write(json.dumps(record, indent=2))
    return judged.validation_ok
