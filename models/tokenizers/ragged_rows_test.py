"""The linear row ids equal TensorFlow's own, empty rows and empty tensors included."""

import numpy as np
import pytest
import tensorflow as tf

from models.tokenizers.ragged_rows import repeat_range, row_ids


@pytest.mark.parametrize("lengths", [[3, 0, 2, 0, 0, 5], [0, 0], [], [1], [0, 7, 0]])
def test_row_ids_are_value_rowids(lengths):
    ragged = tf.RaggedTensor.from_row_lengths(tf.range(sum(lengths)), tf.constant(lengths, tf.int64))
    assert row_ids(ragged).dtype == ragged.value_rowids().dtype
    np.testing.assert_array_equal(row_ids(ragged), ragged.value_rowids())
    counts = tf.constant(lengths, tf.int32)
    np.testing.assert_array_equal(repeat_range(counts), tf.repeat(tf.range(len(lengths)), counts))


def test_row_ids_inside_a_graph_with_unknown_shapes():
    call = tf.function(lambda values, lengths: row_ids(tf.RaggedTensor.from_row_lengths(values, lengths)))
    np.testing.assert_array_equal(
        call(tf.range(4), tf.constant([0, 1, 0, 3], tf.int64)), [1, 3, 3, 3]
    )
