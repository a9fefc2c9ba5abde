"""Blessing reasons as a person reads them, from TFMA's own validation protos (components/evaluator/eval_results.py)."""

from tensorflow_model_analysis.proto import validation_result_pb2

from components.evaluator.config import EvaluationConfig
from components.evaluator.eval_results import describe_failure
from components.evaluator.module import eval_config


def failure_for(threshold, name, value, is_diff):
    failure = validation_result_pb2.ValidationFailure()
    failure.metric_key.name = name
    failure.metric_key.is_diff = is_diff
    failure.metric_threshold.CopyFrom(threshold)
    failure.metric_value.double_value.value = value
    return failure


def thresholds(evaluation):
    """The thresholds the Evaluator is configured with, by metric class."""
    (spec,) = eval_config(2, evaluation).metrics_specs
    return {m.class_name: m.per_slice_thresholds[0].threshold for m in spec.metrics if m.per_slice_thresholds}


def test_value_and_change_thresholds_are_described_with_their_bounds():
    auc = thresholds(EvaluationConfig(min_auc=0.8, max_auc_regression=0.02))["AUC"]
    change = failure_for(auc, "auc", -0.3125, is_diff=True)
    assert describe_failure(change) == (
        "auc change vs. the blessed baseline -0.3125 (needs >= 0.8, needs absolute change >= -0.02)"
    )
    exact = thresholds(EvaluationConfig(max_auc_regression=0.0))["AUC"]
    assert "needs absolute change >= 0)" in describe_failure(failure_for(exact, "auc", -0.1, True))
