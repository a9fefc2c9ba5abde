"""A TFMA metric: each class's precision, recall and F1 of the answer the model gives, and their macro F1.

The answer is what serving returns: the top-1 class for K classes, the positive class when its score is over
0.5 for a binary model, and for multi-label models every label whose probability reaches its decision
threshold (then also subset accuracy, the share of rows whose label set is exactly right, and hamming loss,
the share of (row, label) decisions that are wrong).

TFMA's own F1Score binarizes one class at a threshold: it cannot take class 0 of a binary model's one-column
score (class_id out of range) and, at 0.5, calls a K-class softmax class never predicted when no probability
passes 0.5. Macro F1 weighs every class the same, so an imbalanced test split cannot hide a class the model
ignores; `evaluation.min_macro_f1` gates on it.
"""

from __future__ import annotations

import apache_beam as beam
import numpy as np
from tensorflow_model_analysis.metrics import metric_types, metric_util

from components.evaluator.metric_names import HAMMING_LOSS, SUBSET_ACCURACY

MACRO_F1 = "macro_f1"
PER_CLASS = ("precision", "recall", "f1")
BINARY_THRESHOLD = 0.5  # serving answers the positive class when its softmax probability is over one half


class ClassF1(metric_types.Metric):
    """Per class precision / recall / F1 (sub-keys classId:N) and MACRO_F1, over `num_classes` classes; with
    `thresholds` (one per label), a multi-label model's, and SUBSET_ACCURACY and HAMMING_LOSS."""

    def __init__(self, num_classes: int = 2, thresholds: list[float] | None = None, name: str = MACRO_F1):
        super().__init__(
            metric_util.merge_per_key_computations(_computations),
            num_classes=num_classes,
            thresholds=thresholds,
            name=name,
        )


metric_types.register_metric(ClassF1)


def _computations(
    num_classes: int = 2,
    thresholds: list[float] | None = None,
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
    if thresholds is not None:
        keys += [key(SUBSET_ACCURACY), key(HAMMING_LOSS)]
        combiner = _MultiLabelCombiner(keys, eval_config, model_name, output_name, np.asarray(thresholds))
    else:
        combiner = _ConfusionCombiner(keys, eval_config, model_name, output_name, num_classes)
    return [metric_types.MetricComputation(keys=keys, preprocessors=None, combiner=combiner)]


def answered_class(predictions: np.ndarray) -> int:
    """The class serving answers: argmax of K probabilities, or the positive class of a binary score."""
    if predictions.size == 1:
        return int(float(predictions.reshape(-1)[0]) > BINARY_THRESHOLD)
    return int(np.argmax(predictions))


def precision_recall_f1(true_positive, answered, actual) -> dict[str, list[float]]:
    """Per class precision, recall, F1 from counts; 0 where undefined (a class never answered or never present),
    as scikit-learn's zero_division=0 reports it."""
    true_positive, answered, actual = (np.asarray(a, dtype=float) for a in (true_positive, answered, actual))
    precision = np.divide(true_positive, answered, out=np.zeros_like(true_positive), where=answered > 0)
    recall = np.divide(true_positive, actual, out=np.zeros_like(true_positive), where=actual > 0)
    total = precision + recall
    f1 = np.divide(2 * precision * recall, total, out=np.zeros_like(total), where=total > 0)
    return {"precision": precision.tolist(), "recall": recall.tolist(), "f1": f1.tolist()}


def scores_from_confusion(cells: np.ndarray) -> dict[str, list[float]]:
    """Per class precision, recall, F1 from a K x K [actual][answered] count matrix."""
    return precision_recall_f1(np.diag(cells), cells.sum(axis=0), cells.sum(axis=1))


class _CountsCombiner(beam.CombineFn):
    """Sums numpy count arrays over (label, prediction) pairs; subclasses say what each pair adds."""

    def __init__(self, keys, eval_config, model_name: str, output_name: str):
        self._keys, self._eval_config = keys, eval_config
        self._model_name, self._output_name = model_name, output_name

    def pairs(self, element: metric_types.StandardMetricInputs):
        for labels, predictions, _ in metric_util.to_label_prediction_example_weight(
            element,
            eval_config=self._eval_config,
            model_name=self._model_name,
            output_name=self._output_name,
            flatten=False,
            require_single_example_weight=True,
        ):
            yield np.asarray(labels).reshape(-1), np.asarray(predictions).reshape(-1)

    def merge_accumulators(self, accumulators) -> np.ndarray:
        accumulators = iter(accumulators)
        merged = next(accumulators)
        for accumulator in accumulators:
            merged = merged + accumulator
        return merged


class _ConfusionCombiner(_CountsCombiner):
    """A K x K [actual][answered] count matrix."""

    def __init__(self, keys, eval_config, model_name: str, output_name: str, num_classes: int):
        super().__init__(keys, eval_config, model_name, output_name)
        self._num_classes = num_classes

    def create_accumulator(self) -> np.ndarray:
        return np.zeros((self._num_classes, self._num_classes))

    def add_input(self, accumulator: np.ndarray, element: metric_types.StandardMetricInputs) -> np.ndarray:
        for labels, predictions in self.pairs(element):
            accumulator[int(labels[0]), answered_class(predictions)] += 1
        return accumulator

    def extract_output(self, accumulator: np.ndarray) -> dict:
        scores = scores_from_confusion(accumulator)
        output = {self._keys[0]: float(np.mean(scores["f1"]))}
        for key in self._keys[1:]:
            output[key] = scores[key.name][key.sub_key.class_id]
        return output


class _MultiLabelCombiner(_CountsCombiner):
    """Per label [true positives, answered, tagged], then [rows, rows exactly right, wrong decisions]."""

    def __init__(self, keys, eval_config, model_name: str, output_name: str, thresholds: np.ndarray):
        super().__init__(keys, eval_config, model_name, output_name)
        self._thresholds = thresholds

    def create_accumulator(self) -> np.ndarray:
        return np.zeros(3 * len(self._thresholds) + 3)

    def add_input(self, accumulator: np.ndarray, element: metric_types.StandardMetricInputs) -> np.ndarray:
        k = len(self._thresholds)
        for labels, predictions in self.pairs(element):
            tagged, answered = labels > 0.5, predictions >= self._thresholds
            accumulator[:k] += tagged & answered
            accumulator[k : 2 * k] += answered
            accumulator[2 * k : 3 * k] += tagged
            wrong = int(np.sum(tagged != answered))
            accumulator[3 * k :] += (1, wrong == 0, wrong)
        return accumulator

    def extract_output(self, accumulator: np.ndarray) -> dict:
        k = len(self._thresholds)
        scores = precision_recall_f1(accumulator[:k], accumulator[k : 2 * k], accumulator[2 * k : 3 * k])
        rows, exact, wrong = accumulator[3 * k :]
        output = {self._keys[0]: float(np.mean(scores["f1"]))}
        for key in self._keys[1:-2]:
            output[key] = scores[key.name][key.sub_key.class_id]
        output[self._keys[-2]] = exact / rows if rows else 0.0
        output[self._keys[-1]] = wrong / (rows * k) if rows else 0.0
        return output
