"""The Evaluator's config is built and checked by TFMA itself for any K, before any data or training."""

import pytest
from tensorflow_model_analysis.metrics import metric_specs
from tensorflow_model_analysis.proto import config_pb2

from components.evaluator import module as evaluation
from components.evaluator.config import EvaluationConfig


@pytest.mark.parametrize("num_labels", [2, 3, 7])
def test_tfma_builds_every_metric_and_threshold_for_k_labels(num_labels):
    evaluation.check_eval_config(num_labels, EvaluationConfig())


def test_multiclass_thresholds_judge_accuracy_and_the_macro_auc_only():
    config = evaluation.eval_config(4, EvaluationConfig(min_accuracy=0.5, min_auc=0.8))
    thresholds = metric_specs.metric_thresholds_from_metrics_specs(list(config.metrics_specs))
    judged = {
        (key.name, key.aggregation_type.macro_average if key.aggregation_type else False, bool(key.sub_key))
        for key in thresholds
    }
    assert judged == {("auc", True, False), ("sparse_categorical_accuracy", False, False)}


def test_the_check_catches_a_macro_average_tfma_would_reject_after_training():
    """The config that crashed the first multiclass run in the Evaluator: macro average without class weights."""
    bad = config_pb2.MetricsSpec(
        metrics=[config_pb2.MetricConfig(class_name="AUC")],
        binarize=config_pb2.BinarizationOptions(class_ids={"values": [0, 1, 2]}),
        aggregate=config_pb2.AggregationOptions(macro_average=True),
    )
    with pytest.raises(ValueError, match="class_weights are required"):
        metric_specs.to_computations([bad], eval_config=config_pb2.EvalConfig(metrics_specs=[bad]))


def test_one_label_is_refused():
    with pytest.raises(ValueError, match="at least two labels"):
        evaluation.eval_config(1, EvaluationConfig())


def test_per_class_precision_and_recall_are_of_top1_predictions():
    """3 classes; actual x predicted counts: a model that answers class 0 for most of class 1 and never class 2.
    One-vs-rest at 0.5 would call class 1 never predicted if its softmax stays under 0.5; top-1 does not."""
    counts = {(0, 0): 8, (0, 1): 2, (1, 0): 6, (1, 1): 4, (2, 0): 3, (2, 1): 7}
    matrix = {
        "entries": [
            {"actualClassId": a, "predictedClassId": p, "numWeightedExamples": float(n)} for (a, p), n in counts.items()
        ]
    }
    top1 = evaluation.top1_precision_recall(matrix, ["a", "b", "c"])
    assert top1["a"] == {"precision": 8 / 17, "recall": 8 / 10}
    assert top1["b"] == {"precision": 4 / 13, "recall": 4 / 10}
    assert top1["c"] == {"precision": 0.0, "recall": 0.0}  # never predicted: 0, as scikit-learn reports it
    assert evaluation.confusion_cells(matrix, 3) == [[8, 2, 0], [6, 4, 0], [3, 7, 0]]


def test_rebatching_keeps_every_row_in_order_in_batches_of_at_most_the_given_rows():
    """The adaptive reader's batches (1, 2, 4 ... rows) regrouped: no batch over the limit, nothing lost."""
    import apache_beam as beam
    import pyarrow as pa
    import tensorflow_model_analysis as tfma
    from apache_beam.testing.util import assert_that

    from components.local_beam import LOCAL_BEAM_RUNNER

    key = tfma.constants.ARROW_RECORD_BATCH_KEY
    sizes, start, inputs = [1, 2, 4, 8, 16, 32], 0, []
    for size in sizes:
        inputs.append({key: pa.RecordBatch.from_pydict({"row": list(range(start, start + size))})})
        start += size

    def check(outputs):
        rows = [batch[key].column("row").to_pylist() for batch in outputs]
        assert [len(r) for r in rows] == [15, 16, 32]  # 1+2+4+8, then each batch that would pass 20 starts anew
        assert [row for batch in rows for row in batch] == list(range(sum(sizes)))

    with beam.Pipeline(runner=LOCAL_BEAM_RUNNER) as pipeline:
        batches = pipeline | beam.Create(inputs, reshuffle=False) | evaluation.rebatch_extractor(20).ptransform
        assert_that(batches, check)
