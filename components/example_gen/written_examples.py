"""Reading back what the ExampleGen wrote (Split-<name>/*.gz tf.Examples): texts and label names of one split, as
span drift and the serving monitor compare them with newer data."""

from __future__ import annotations

import glob
import heapq
import os

from components.example_gen.splitting import unit_hash
from models.names import LABEL_NAME_FEATURE, TEXT_FEATURE


def read_written(examples_uri: str, split: str, rows: int) -> tuple[list[str], list[str]]:
    """Texts and label names of one split: all of them, or a sample of `rows` chosen by a hash of their content
    (uniform, and the same on every read). A multi-label row's labels are one value, joined by commas."""
    import tensorflow as tf

    files = sorted(glob.glob(os.path.join(examples_uri, f"Split-{split}", "*.gz")))

    def pairs():
        for record in tf.data.TFRecordDataset(files, compression_type="GZIP").as_numpy_iterator():
            features = tf.train.Example.FromString(record).features.feature
            yield (
                features[TEXT_FEATURE].bytes_list.value[0].decode("utf-8"),
                ",".join(name.decode("utf-8") for name in features[LABEL_NAME_FEATURE].bytes_list.value),
            )

    kept = heapq.nsmallest(rows, pairs(), key=lambda pair: unit_hash(0, "drift", pair))
    return [text for text, _ in kept], [label for _, label in kept]
