"""Evaluator's TFMA config: the metrics people read and the thresholds that decide the blessing.

Also passed to the Evaluator as its `module_path`, so the Evaluator's process imports tensorflow_text
(the exported model's transform graph needs its ops) wherever it runs, and TFX takes its
`custom_extractors` from here.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import apache_beam as beam
import tensorflow_model_analysis as tfma
import tensorflow_text  # noqa: F401  (registers TF.Text ops before TFMA loads the model)
from tensorflow_model_analysis.proto import config_pb2  # `tfma.EvalConfig` etc. exist only once TFX is imported
from tfx_bsl.arrow import table_util

from components.evaluator.config import EvaluationConfig
from components.evaluator.metric_names import ACCURACY, AUC
from models.names import (
    LABEL_FEATURE,
    LABEL_NAME_FEATURE,
    LENGTH_BUCKET,
    POSITIVE_SCORE,
    PROBABILITIES,
    SERVING_EVALUATOR,
    TRANSFORM_FEATURES,
)

EVAL_SPLIT = "test"
CLASS_METRICS_MODULE = "components.evaluator.class_metrics"
# Rows per model call in the Evaluator. The serving signature runs a request shortest texts first, 32 at a
# time: the larger the request, the less padding each group of 32 carries.
INFERENCE_BATCH_ROWS = 2048
# Our names of the headline metrics (the run summary, --summary-json, the report): the same meaning for
# any K. Binary: the positive class's score. K classes: top-1 accuracy and the unweighted mean (macro) of
# the one-vs-rest AUCs, precisions and recalls.
HEADLINE = (ACCURACY, AUC, "auc_pr", "precision", "recall")
BINARY_NAMES = {"binary_accuracy": ACCURACY}
MULTICLASS_NAMES = {"sparse_categorical_accuracy": ACCURACY}


def _overall(threshold: config_pb2.MetricThreshold) -> list[config_pb2.PerSliceMetricThreshold]:
    """Absolute bounds judge the whole test split; the built-in slices (label, length) are for reading (AUC is
    undefined on a slice holding one label)."""
    return [config_pb2.PerSliceMetricThreshold(slicing_specs=[config_pb2.SlicingSpec()], threshold=threshold)]


def user_slicing_specs(evaluation: EvaluationConfig) -> list[config_pb2.SlicingSpec]:
    """One spec per evaluation.slice_columns column and per cross of them."""
    specs = [(column,) for column in evaluation.slice_columns] + [tuple(c) for c in evaluation.slice_crosses]
    return [config_pb2.SlicingSpec(feature_keys=list(spec)) for spec in specs]


def _on_gated_slices(
    evaluation: EvaluationConfig, threshold: Callable[[float], config_pb2.MetricThreshold]
) -> list[config_pb2.PerSliceMetricThreshold]:
    """`threshold(allowed AUC loss)` on the slices of each gated slice column and cross."""
    return [
        config_pb2.PerSliceMetricThreshold(
            slicing_specs=[config_pb2.SlicingSpec(feature_keys=list(spec))], threshold=threshold(loss)
        )
        for spec, loss in evaluation.gated_slices().items()
    ]


def _slice_no_regression(evaluation: EvaluationConfig) -> list[config_pb2.PerSliceMetricThreshold]:
    """Each gated slice column's (or cross's) slices may lose at most its allowed AUC against the baseline; the
    noise-aware gate (noise_aware_gate.py) then keeps only the losses whose paired interval lies beyond it."""
    return _on_gated_slices(
        evaluation,
        lambda loss: config_pb2.MetricThreshold(
            change_threshold=config_pb2.GenericChangeThreshold(
                direction=config_pb2.MetricDirection.HIGHER_IS_BETTER, absolute={"value": -loss - 1e-10}
            )
        ),
    )


def example_count(evaluation: EvaluationConfig) -> config_pb2.MetricConfig:
    """ExampleCount, with evaluation.min_slice_examples as the lower bound of each gated slice: a smaller slice
    fails it, and the noise-aware gate reads that failure as "reported, not gated" (its other failures dropped)."""
    least = config_pb2.MetricThreshold(
        value_threshold=config_pb2.GenericValueThreshold(lower_bound={"value": evaluation.min_slice_examples})
    )
    return config_pb2.MetricConfig(
        class_name="ExampleCount", per_slice_thresholds=_on_gated_slices(evaluation, lambda _: least)
    )


def _bound(lower: float) -> list[config_pb2.PerSliceMetricThreshold]:
    return _overall(
        config_pb2.MetricThreshold(value_threshold=config_pb2.GenericValueThreshold(lower_bound={"value": lower}))
    )


def _no_regression(lower: float, max_regression: float) -> list[config_pb2.PerSliceMetricThreshold]:
    return _overall(
        config_pb2.MetricThreshold(
            value_threshold=config_pb2.GenericValueThreshold(lower_bound={"value": lower}),
            change_threshold=config_pb2.GenericChangeThreshold(
                direction=config_pb2.MetricDirection.HIGHER_IS_BETTER,
                absolute={"value": -max_regression - 1e-10},
            ),
        )
    )


def metric_names(num_labels: int) -> dict[str, str]:
    """TFMA's names of the top-level metrics -> ours (the others already carry our names)."""
    return BINARY_NAMES if num_labels == 2 else MULTICLASS_NAMES


def _curve_metrics(evaluation: EvaluationConfig | None) -> list[config_pb2.MetricConfig]:
    """AUC (thresholded when `evaluation` is given) and AUC-PR: threshold-free."""
    auc = config_pb2.MetricConfig(class_name="AUC")
    if evaluation is not None:
        auc.per_slice_thresholds.extend(_no_regression(evaluation.min_auc, evaluation.max_auc_regression))
        auc.per_slice_thresholds.extend(_slice_no_regression(evaluation))
    return [auc, config_pb2.MetricConfig(class_name="AUC", config='{"curve": "PR", "name": "auc_pr"}')]


def _at_half() -> list[config_pb2.MetricConfig]:
    """Binary precision and recall of the positive score at 0.5."""
    return [config_pb2.MetricConfig(class_name="Precision"), config_pb2.MetricConfig(class_name="Recall")]


def confusion_cells(matrix, k: int) -> list[list[float]]:
    """TFMA's multi-class confusion matrix (sparse `entries`) as K x K counts, [actual][predicted]."""
    cells = [[0.0] * k for _ in range(k)]
    for entry in matrix.get("entries", []):
        cells[int(entry.get("actualClassId", 0))][int(entry.get("predictedClassId", 0))] += entry.get(
            "numWeightedExamples", 0.0
        )
    return cells


def top1_precision_recall(matrix, label_names: list[str]) -> dict[str, dict[str, float]]:
    """K classes: each class's precision and recall of top-1 predictions, from TFMA's multi-class confusion
    matrix (its `entries` of actualClassId, predictedClassId, numWeightedExamples). One-vs-rest precision at
    0.5 would call a class never predicted whenever no softmax output passes 0.5; top-1 is what the model
    answers. A class never predicted has precision 0 (as scikit-learn reports it)."""
    k = len(label_names)
    cells = confusion_cells(matrix, k)
    result = {}
    for i, name in enumerate(label_names):
        predicted = sum(cells[row][i] for row in range(k))
        actual = sum(cells[i])
        result[name] = {
            "precision": cells[i][i] / predicted if predicted else 0.0,
            "recall": cells[i][i] / actual if actual else 0.0,
        }
    return result


def class_f1(
    num_labels: int, evaluation: EvaluationConfig, thresholds: tuple[float, ...] | None = None
) -> config_pb2.MetricConfig:
    """Each class's precision / recall / F1 of the served answer and their macro F1 (evaluator/class_metrics.py),
    gated by evaluation.min_macro_f1 when set; with per-label `thresholds`, a multi-label model's."""
    settings = {"num_classes": num_labels, **({"thresholds": list(thresholds)} if thresholds is not None else {})}
    metric = config_pb2.MetricConfig(class_name="ClassF1", module=CLASS_METRICS_MODULE, config=json.dumps(settings))
    if evaluation.min_macro_f1 is not None:
        metric.per_slice_thresholds.extend(_bound(evaluation.min_macro_f1))
    return metric


def multi_label_specs(thresholds: tuple[float, ...], evaluation: EvaluationConfig) -> list[config_pb2.MetricsSpec]:
    """Multi-label: per label (one column of the 0/1 label vector against its probability) AUC and AUC-PR; their
    macro means, the headline on which min_auc and the baseline gate act; each label's precision / recall / F1
    at its decision threshold, macro F1, subset accuracy and hamming loss. min_accuracy does not apply: no
    single accuracy means for label sets what it means for one label."""
    k = len(thresholds)
    metrics = [example_count(evaluation), class_f1(k, evaluation, thresholds)]
    return [config_pb2.MetricsSpec(metrics=metrics), *_per_class_curves(k, evaluation)]


def _per_class_curves(num_labels: int, evaluation: EvaluationConfig) -> list[config_pb2.MetricsSpec]:
    """Per class (one-vs-rest, or one label's column) AUC, AUC-PR and ROC points, read and not thresholded (a
    rare class's AUC is noisy); their macro averages, on which the AUC thresholds and the baseline gate act
    (TFMA needs class weights to know which classes a macro average is over)."""
    classes = list(range(num_labels))
    return [
        config_pb2.MetricsSpec(
            metrics=[*_curve_metrics(None), config_pb2.MetricConfig(class_name="ConfusionMatrixPlot")],
            binarize=config_pb2.BinarizationOptions(class_ids={"values": classes}),
        ),
        config_pb2.MetricsSpec(
            metrics=_curve_metrics(evaluation),
            aggregate=config_pb2.AggregationOptions(macro_average=True, class_weights={c: 1.0 for c in classes}),
        ),
    ]


def metrics_specs(
    num_labels: int, evaluation: EvaluationConfig, thresholds: tuple[float, ...] | None = None
) -> list[config_pb2.MetricsSpec]:
    """Binary: metrics of the positive score. K classes: top-1 accuracy and the K x K confusion matrix (from
    which the summary takes each class's top-1 precision and recall); per class (one-vs-rest) AUC, AUC-PR and
    ROC points; their macro averages, on which the AUC thresholds and the baseline gate act. Both: each class's
    precision, recall and F1 of the served answer, and their macro F1."""
    if num_labels < 2:
        raise ValueError(f"a classifier needs at least two labels, got {num_labels}")
    if thresholds is not None:
        return multi_label_specs(thresholds, evaluation)
    if num_labels == 2:
        metrics = [
            example_count(evaluation),
            config_pb2.MetricConfig(class_name="BinaryAccuracy", per_slice_thresholds=_bound(evaluation.min_accuracy)),
            *_curve_metrics(evaluation),
            *_at_half(),
            config_pb2.MetricConfig(class_name="Calibration"),
            config_pb2.MetricConfig(class_name="CalibrationPlot"),
            config_pb2.MetricConfig(class_name="ConfusionMatrixPlot"),
            class_f1(num_labels, evaluation),
        ]
        return [config_pb2.MetricsSpec(metrics=metrics)]
    metrics = [
        example_count(evaluation),
        config_pb2.MetricConfig(
            class_name="SparseCategoricalAccuracy", per_slice_thresholds=_bound(evaluation.min_accuracy)
        ),
        config_pb2.MetricConfig(class_name="MultiClassConfusionMatrixPlot"),
        class_f1(num_labels, evaluation),
    ]
    return [config_pb2.MetricsSpec(metrics=metrics), *_per_class_curves(num_labels, evaluation)]


def eval_config(
    num_labels: int, evaluation: EvaluationConfig, thresholds: tuple[float, ...] | None = None
) -> config_pb2.EvalConfig:
    """The Evaluator's config: the model's evaluator signature, slices by label, by token length and by the user's
    slice columns and crosses (gated against the baseline, evaluation.slice_thresholds). Per-label
    decision `thresholds` make it a multi-label model's (a label slice then holds the rows tagged with it)."""
    binary = num_labels == 2 and thresholds is None
    model_spec = config_pb2.ModelSpec(
        signature_name=SERVING_EVALUATOR,
        preprocessing_function_names=[TRANSFORM_FEATURES],
        label_key=LABEL_FEATURE,
        prediction_key=POSITIVE_SCORE if binary else PROBABILITIES,
        model_type=tfma.TF_GENERIC,
    )
    slicing = [
        config_pb2.SlicingSpec(),
        config_pb2.SlicingSpec(feature_keys=[LABEL_NAME_FEATURE]),
        config_pb2.SlicingSpec(feature_keys=[LENGTH_BUCKET]),
        *user_slicing_specs(evaluation),
    ]
    options = config_pb2.Options(
        confidence_intervals=config_pb2.ConfidenceIntervalOptions(method=config_pb2.ConfidenceIntervalOptions.JACKKNIFE)
    )
    if evaluation.confidence_intervals != "auto":  # auto: left unset, the Evaluator decides per run (executor.py)
        options.compute_confidence_intervals.value = evaluation.confidence_intervals == "always"
    return config_pb2.EvalConfig(
        model_specs=[model_spec],
        slicing_specs=slicing,
        metrics_specs=metrics_specs(num_labels, evaluation, thresholds),
        options=options,
    )


def check_eval_config(
    num_labels: int, evaluation: EvaluationConfig, thresholds: tuple[float, ...] | None = None
) -> None:
    """Builds the Evaluator's metric computations and thresholds the way TFMA will, with no data and no
    model: a config TFMA rejects fails here in seconds, not after training."""
    from tensorflow_model_analysis.metrics import metric_specs

    config = eval_config(num_labels, evaluation, thresholds)
    metric_specs.to_computations(list(config.metrics_specs), eval_config=config)
    metric_specs.metric_thresholds_from_metrics_specs(list(config.metrics_specs))


def _merge_record_batches(extracts: list[dict]) -> dict:
    """One extract of the batches' rows; at this first stage an extract holds only its record batch."""
    key = tfma.constants.ARROW_RECORD_BATCH_KEY
    return {key: table_util.MergeRecordBatches([extract[key] for extract in extracts])}


def rebatch_extractor(rows: int) -> tfma.extractors.Extractor:
    """Regroups the Evaluator's input into record batches of up to `rows` rows before TFMA's extractors.

    TFX reads the examples with Beam's adaptive batching (tfxio.BeamSource() without a batch size): batches of
    1, 1, 2, 2, 4 ... rows, 18-19 calls of each signature for the 1,282 test reviews. tfx_bsl's byte-size flag would
    change every reader in the process, and TFMA's `inference_batch_size` acts only in its bulk-inference
    extractor, which skips the Transform features our length slices need: hence this one Beam step.
    """
    return tfma.extractors.Extractor(
        stage_name="RebatchInputs",
        ptransform=beam.BatchElements(
            min_batch_size=rows,
            max_batch_size=rows,
            element_size_fn=lambda extract: extract[tfma.constants.ARROW_RECORD_BATCH_KEY].num_rows,
        )
        | beam.Map(_merge_record_batches),
    )


def custom_extractors(eval_shared_model, eval_config, tensor_adapter_config) -> list[tfma.extractors.Extractor]:
    """TFX's Evaluator hook: TFMA's default extractors, fed batches of INFERENCE_BATCH_ROWS rows."""
    return [
        rebatch_extractor(INFERENCE_BATCH_ROWS),
        *tfma.default_extractors(
            eval_shared_model=eval_shared_model, eval_config=eval_config, tensor_adapter_config=tensor_adapter_config
        ),
    ]
