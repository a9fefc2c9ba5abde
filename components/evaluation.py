"""Evaluator's TFMA config: the metrics people read and the thresholds that decide the blessing.

Also passed to the Evaluator as its `module_path`, so the Evaluator's process imports tensorflow_text
(the exported model's transform graph needs its ops) wherever it runs.
"""

from __future__ import annotations

import tensorflow_model_analysis as tfma
import tensorflow_text  # noqa: F401  (registers TF.Text ops before TFMA loads the model)
from tensorflow_model_analysis.proto import config_pb2

from components.hf_example_gen.executor import LABEL_FEATURE, LABEL_NAME_FEATURE
from components.transform import LENGTH_BUCKET_FEATURE
from models import signatures
from pipeline.configs import EvaluationConfig

EVAL_SPLIT = "test"
ACCURACY, AUC = "accuracy", "auc"
# TFMA's metric names for binary / multiclass; the run summary reports both as accuracy and auc.
BINARY_NAMES = {ACCURACY: "binary_accuracy", AUC: "auc"}
MULTICLASS_NAMES = {ACCURACY: "sparse_categorical_accuracy", AUC: "macro_auc"}


def _overall(threshold: tfma.MetricThreshold) -> list[config_pb2.PerSliceMetricThreshold]:
    """Thresholds judge the whole test split; per-slice values are for reading (AUC is undefined on a
    slice holding one label)."""
    return [config_pb2.PerSliceMetricThreshold(slicing_specs=[tfma.SlicingSpec()], threshold=threshold)]


def _bound(lower: float) -> list[config_pb2.PerSliceMetricThreshold]:
    return _overall(tfma.MetricThreshold(value_threshold=tfma.GenericValueThreshold(lower_bound={"value": lower})))


def _no_regression(lower: float, max_regression: float) -> list[config_pb2.PerSliceMetricThreshold]:
    return _overall(
        tfma.MetricThreshold(
            value_threshold=tfma.GenericValueThreshold(lower_bound={"value": lower}),
            change_threshold=tfma.GenericChangeThreshold(
                direction=tfma.MetricDirection.HIGHER_IS_BETTER,
                absolute={"value": -max_regression - 1e-10},
            ),
        )
    )


def metric_names(num_labels: int) -> dict[str, str]:
    return BINARY_NAMES if num_labels == 2 else MULTICLASS_NAMES


def eval_config(num_labels: int, evaluation: EvaluationConfig) -> tfma.EvalConfig:
    """Binary: the positive score; multiclass: probabilities with macro one-vs-rest AUC."""
    binary = num_labels == 2
    model_spec = tfma.ModelSpec(
        signature_name=signatures.SERVING_EVALUATOR,
        preprocessing_function_names=[signatures.TRANSFORM_FEATURES],
        label_key=LABEL_FEATURE,
        prediction_key=signatures.POSITIVE_SCORE if binary else signatures.PROBABILITIES,
        model_type=tfma.TF_GENERIC,
    )
    slicing = [
        tfma.SlicingSpec(),
        tfma.SlicingSpec(feature_keys=[LABEL_NAME_FEATURE]),
        tfma.SlicingSpec(feature_keys=[LENGTH_BUCKET_FEATURE]),
    ]
    if binary:
        metrics = [
            tfma.MetricConfig(class_name="ExampleCount"),
            tfma.MetricConfig(class_name="BinaryAccuracy", per_slice_thresholds=_bound(evaluation.min_accuracy)),
            tfma.MetricConfig(
                class_name="AUC",
                per_slice_thresholds=_no_regression(evaluation.min_auc, evaluation.max_auc_regression),
            ),
            tfma.MetricConfig(class_name="AUC", config='{"curve": "PR", "name": "auc_pr"}'),
            tfma.MetricConfig(class_name="Precision"),
            tfma.MetricConfig(class_name="Recall"),
            tfma.MetricConfig(class_name="Calibration"),
            tfma.MetricConfig(class_name="CalibrationPlot"),
            tfma.MetricConfig(class_name="ConfusionMatrixPlot"),
        ]
        specs = [tfma.MetricsSpec(metrics=metrics)]
    else:
        specs = [
            tfma.MetricsSpec(
                metrics=[
                    tfma.MetricConfig(class_name="ExampleCount"),
                    tfma.MetricConfig(
                        class_name="SparseCategoricalAccuracy",
                        per_slice_thresholds=_bound(evaluation.min_accuracy),
                    ),
                    tfma.MetricConfig(class_name="MultiClassConfusionMatrixPlot"),
                ]
            ),
            tfma.MetricsSpec(
                metrics=[
                    tfma.MetricConfig(
                        class_name="AUC",
                        per_slice_thresholds=_no_regression(evaluation.min_auc, evaluation.max_auc_regression),
                    ),
                    tfma.MetricConfig(class_name="AUC", config='{"curve": "PR", "name": "auc_pr"}'),
                ],
                binarize=tfma.BinarizationOptions(class_ids={"values": list(range(num_labels))}),
                aggregate=tfma.AggregationOptions(macro_average=True),
            ),
        ]
    return tfma.EvalConfig(model_specs=[model_spec], slicing_specs=slicing, metrics_specs=specs)
