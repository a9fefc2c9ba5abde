import pytest
import tensorflow as tf

from components.trainer.class_weights import LabelCounts, class_weight_map, train_label_counts


def test_balanced_is_n_over_k_times_the_class_count_and_absent_classes_weigh_nothing():
    counts = LabelCounts(90, [60, 30, 0])
    assert class_weight_map("balanced", ["a", "b", "c"], counts) == {0: 90 / 180, 1: 90 / 90, 2: 0.0}
    assert class_weight_map("none", ["a", "b"], None) is None
    assert class_weight_map({"b": 3.0}, ["a", "b"], None) == {0: 1.0, 1: 3.0}


def test_train_label_counts_read_every_record_of_the_gzipped_files(tmp_path):
    for shard, labels in enumerate([[0, 1, 1], [2, 1]]):
        with tf.io.TFRecordWriter(str(tmp_path / f"part-{shard}.gz"), options="GZIP") as writer:
            for label in labels:
                feature = {"label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))}
                writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    assert train_label_counts([str(tmp_path / "part-*")], 4) == LabelCounts(5, [1, 3, 1, 0])


def test_multi_label_balanced_weighs_each_labels_positives_by_its_negatives(tmp_path):
    with tf.io.TFRecordWriter(str(tmp_path / "part.gz"), options="GZIP") as writer:
        for vector in ([1, 0, 1], [1, 0, 0], [0, 0, 0], [1, 1, 0]):
            feature = {"label": tf.train.Feature(int64_list=tf.train.Int64List(value=vector))}
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    counts = train_label_counts([str(tmp_path / "part.gz")], 3, multi_label=True)
    assert counts == LabelCounts(4, [3, 1, 1])
    assert class_weight_map("balanced", ["a", "b", "c"], counts, multi_label=True) == {0: 1 / 3, 1: 3.0, 2: 3.0}


@pytest.mark.parametrize("setting", ["none", "balanced"])
def test_a_weight_map_covers_every_label(setting):
    weights = class_weight_map(setting, ["x", "y"], LabelCounts(10, [5, 5]))
    assert weights is None or set(weights) == {0, 1}
