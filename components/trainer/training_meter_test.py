"""The Trainer's meter counts the batches the training loop really took, and rates them against the peak."""

import pytest
import tensorflow as tf

from components.trainer.training_meter import TrainingMeter, record_batch_shapes
from models.hardware.flops import EncoderShape
from models.hardware.machine_peak import MatmulPeak


def test_recorded_shapes_are_the_batches_the_loop_took_in_order():
    widths = [8, 16, 8, 32]
    batches = [({"attention_mask": tf.ones([3, w], tf.int32)}, tf.zeros([3], tf.int64)) for w in widths]
    dataset = tf.data.Dataset.from_generator(
        lambda: iter(batches),
        output_signature=({"attention_mask": tf.TensorSpec([3, None], tf.int32)}, tf.TensorSpec([3], tf.int64)),
    ).prefetch(2)
    records = []
    taken = list(record_batch_shapes(dataset, records).take(3))
    assert len(taken) == 3
    assert records[:3] == [(3, 8, 24, 3), (3, 16, 48, 3), (3, 8, 24, 3)]
    meter = TrainingMeter(EncoderShape(2, 64, 128, 2, 2), MatmulPeak("float32", 100.0, "/CPU:0"), records=records)
    flops = meter.totals(3).training_flops(meter.shape)
    assert meter.model_gflops(3, 2.0) == pytest.approx(flops / 2.0 / 1e9)
    assert "% of peak" in meter.describe(3, 2.0)
    # Two workers: each computes half of every global batch against the peak it measured itself.
    worker = TrainingMeter(meter.shape, meter.peak, share=0.5, records=records)
    assert worker.model_gflops(3, 2.0) == pytest.approx(meter.model_gflops(3, 2.0) / 2)
    assert worker.to_json()["training_flops"] == meter.to_json()["training_flops"]


def test_packed_rows_count_their_texts_as_examples_and_their_rows_for_flops():
    """Two rows of width 16 holding five texts (training.packing): five examples, two rows' tokens computed."""
    packed = TrainingMeter(EncoderShape(2, 64, 128, 2, 2), None, records=[(2, 16, 30, 5)])
    one_per_row = TrainingMeter(packed.shape, None, records=[(2, 16, 30)])
    assert packed.totals(1).examples == 5 and one_per_row.totals(1).examples == 2
    assert packed.totals(1).padded_tokens == 32 and packed.totals(1).padding_share == pytest.approx(2 / 32)
