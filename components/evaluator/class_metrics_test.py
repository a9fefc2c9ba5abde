import numpy as np
import pandas as pd
import pytest
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.proto import config_pb2

from components.evaluator.class_metrics import answered_class, scores_from_confusion
from components.evaluator.config import EvaluationConfig
from components.evaluator.module import class_f1


def test_per_class_scores_match_their_definitions_and_undefined_ones_are_zero():
    cells = np.array([[3.0, 1.0, 0.0], [2.0, 2.0, 0.0], [0.0, 0.0, 0.0]])  # class 2 never present nor answered
    scores = scores_from_confusion(cells)
    assert scores["precision"] == pytest.approx([3 / 5, 2 / 3, 0.0])
    assert scores["recall"] == pytest.approx([3 / 4, 2 / 4, 0.0])
    assert scores["f1"][0] == pytest.approx(2 * 0.6 * 0.75 / 1.35)


def test_the_answered_class_is_what_serving_answers():
    assert answered_class(np.array([0.5])) == 0 and answered_class(np.array([0.51])) == 1
    assert answered_class(np.array([0.2, 0.3, 0.5])) == 2


def _evaluate(labels, predictions, num_classes):
    spec = config_pb2.MetricsSpec(metrics=[class_f1(num_classes, EvaluationConfig())])
    eval_config = config_pb2.EvalConfig(
        model_specs=[config_pb2.ModelSpec(label_key="label", prediction_key="prediction")],
        slicing_specs=[config_pb2.SlicingSpec()],
        metrics_specs=[spec],
    )
    result = tfma.analyze_raw_data(pd.DataFrame({"label": labels, "prediction": predictions}), eval_config)
    ((_, metrics),) = result.slicing_metrics
    return {sub: {k: v["doubleValue"] for k, v in values.items()} for sub, values in metrics[""].items()}


def test_tfma_runs_it_on_a_binary_score_with_both_classes_scored():
    found = _evaluate(np.array([0, 0, 0, 1, 1, 1]), np.array([0.1, 0.7, 0.2, 0.9, 0.8, 0.3]), 2)
    # answers 0 1 0 1 1 0: class 0 precision 2/3 recall 2/3, class 1 the same
    assert found["classId:0"]["recall"] == pytest.approx(2 / 3)
    assert found["classId:1"]["precision"] == pytest.approx(2 / 3)
    assert found[""]["macro_f1"] == pytest.approx(2 / 3)


def test_tfma_runs_it_on_k_probabilities_by_top1():
    probabilities = [[0.5, 0.3, 0.2], [0.2, 0.5, 0.3], [0.4, 0.3, 0.3], [0.1, 0.2, 0.7]]
    found = _evaluate(np.array([0, 1, 2, 2]), probabilities, 3)
    assert found["classId:2"]["recall"] == pytest.approx(0.5)
    assert found["classId:0"]["precision"] == pytest.approx(0.5)
    f1 = [2 * 0.5 * 1 / 1.5, 1.0, 2 * 1 * 0.5 / 1.5]
    assert found[""]["macro_f1"] == pytest.approx(sum(f1) / 3)
