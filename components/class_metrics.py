"""A TFMA metric: each class's precision, recall and F1 of the answer the model gives, and their macro F1.

The answer is what serving returns: the top-1 class for K classes, the positive class when its score is over
0.5 for a binary model. TFMA's own F1Score binarizes one class at a threshold: it cannot take class 0 of a
binary model's one-column score (class_id out of range) and, at 0.5, calls a K-class softmax class never
predicted when no probability passes 0.5. Macro F1 weighs every class the same, so an imbalanced test split
cannot hide a class the model ignores; `evaluation.min_macro_f1` gates on it.
"""

from __future__ import annotations

import apache_beam as beam
import numpy as np
from tensorflow_model_analysis.metrics import metric_types, metric_util

MACRO_F1 = "macro_f1"
PER_CLASS = ("precision", "recall", "f1")
BINARY_THRESHOLD = 0.5  # serving answers the positive class when its softmax probability is over one half


class ClassF1(metric_types.Metric):
    """Per class precision / recall / F1 (sub-keys classId:N) and MACRO_F1, over `num_classes` classes."""

    def __init__(self, num_classes: int = 2, name: str = MACRO_F1):
        super().__init__(metric_util.merge_per_key_computations(_computations), num_classes=num_classes, name=name)


metric_types.register_metric(ClassF1)


def _computations(
    num_classes: int = 2,
    name: str = MACRO_F1,
    eval_config=None,
    model_name: str = "",
    output_name: str = "",
    example_weighted: bool = False,
) -> metric_types.MetricComputations:
    def key(metric: str, class_id: int | None = None) -> metric_types.MetricKey:
        sub_key = metric_types.SubKey(class_id=class_id) if class_id is not None else None
        return metric_types.MetricKey(
            name=metric, model_name=model_name, output_name=output_name, sub_key=sub_key,
            example_weighted=example_weighted,
        )  # fmt: skip

    keys = [key(name), *(key(m, c) for c in range(num_classes) for m in PER_CLASS)]
    combiner = _ConfusionCombiner(keys, eval_config, model_name, output_name, num_classes)
    return [metric_types.MetricComputation(keys=keys, preprocessors=None, combiner=combiner)]


def answered_class(predictions: np.ndarray) -> int:
    """The class serving answers: argmax of K probabilities, or the positive class of a binary score."""
    if predictions.size == 1:
        return int(float(predictions.reshape(-1)[0]) > BINARY_THRESHOLD)
    return int(np.argmax(predictions))


def scores_from_confusion(cells: np.ndarray) -> dict[str, list[float]]:
    """Per class precision, recall, F1 from a K x K [actual][answered] count matrix; 0 where undefined (a class
    never answered or never present), as scikit-learn's zero_division=0 reports it."""
    true_positive = np.diag(cells)
    answered, actual = cells.sum(axis=0), cells.sum(axis=1)
    precision = np.divide(true_positive, answered, out=np.zeros_like(true_positive), where=answered > 0)
    recall = np.divide(true_positive, actual, out=np.zeros_like(true_positive), where=actual > 0)
    total = precision + recall
    f1 = np.divide(2 * precision * recall, total, out=np.zeros_like(total), where=total > 0)
    return {"precision": precision.tolist(), "recall": recall.tolist(), "f1": f1.tolist()}


class _ConfusionCombiner(beam.CombineFn):
    def __init__(self, keys, eval_config, model_name: str, output_name: str, num_classes: int):
        self._keys, self._eval_config = keys, eval_config
        self._model_name, self._output_name, self._num_classes = model_name, output_name, num_classes

    def create_accumulator(self) -> np.ndarray:
        return np.zeros((self._num_classes, self._num_classes))

    def add_input(self, accumulator: np.ndarray, element: metric_types.StandardMetricInputs) -> np.ndarray:
        for labels, predictions, _ in metric_util.to_label_prediction_example_weight(
            element,
            eval_config=self._eval_config,
            model_name=self._model_name,
            output_name=self._output_name,
            flatten=False,
            require_single_example_weight=True,
        ):
            accumulator[int(np.asarray(labels).reshape(-1)[0]), answered_class(np.asarray(predictions))] += 1
        return accumulator

    def merge_accumulators(self, accumulators) -> np.ndarray:
        accumulators = iter(accumulators)
        merged = next(accumulators)
        for accumulator in accumulators:
            merged = merged + accumulator
        return merged

    def extract_output(self, accumulator: np.ndarray) -> dict:
        scores = scores_from_confusion(accumulator)
        output = {self._keys[0]: float(np.mean(scores["f1"]))}
        for key in self._keys[1:]:
            output[key] = scores[key.name][key.sub_key.class_id]
        return output
