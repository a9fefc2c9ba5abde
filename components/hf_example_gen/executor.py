"""Writes the dataset as gzipped tf.Example TFRecords under Split-<name>/, one Beam pipeline for all splits.

Each example has the features of `models.features`: `text`, `text_pair` for sentence pairs, `label` (int64
id, 0 included: TFX's parquet path drops falsy values) and `label_name`. The label set, the dataset
fingerprint, per-split counts, rows dropped for missing values and the span go on the output artifact.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os

import apache_beam as beam
import tensorflow as tf
from absl import logging
from tfx.components.util import examples_utils
from tfx.dsl.components.base import base_beam_executor
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils

from components.hf_example_gen import sources, spans
from models.features import LABEL_FEATURE, LABEL_NAME_FEATURE, TEXT_FEATURE, TEXT_PAIR_FEATURE
from pipeline.configs import TFX_SPLITS, DatasetConfig, load_dataset_config, to_dict

LABEL_NAMES_PROPERTY = "label_names"
FINGERPRINT_PROPERTY = "dataset_fingerprint"
SPLIT_COUNTS_PROPERTY = "split_counts"
DROPPED_COUNTS_PROPERTY = "dropped_counts"  # rows left out per split for a missing text or label
SPANS_PROPERTY = "spans"  # the window of spans read, as JSON; the artifact's `span` is the newest of them
INPUT_FINGERPRINT_PROPERTY = "input_fingerprint"


def _bytes(value: str) -> tf.train.Feature:
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode("utf-8")]))


def to_example(text: str, text_pair: str | None, label_id: int, label_names: tuple[str, ...]) -> bytes:
    feature = {
        TEXT_FEATURE: _bytes(text),
        LABEL_FEATURE: tf.train.Feature(int64_list=tf.train.Int64List(value=[label_id])),
        LABEL_NAME_FEATURE: _bytes(label_names[label_id]),
    }
    if text_pair is not None:
        feature[TEXT_PAIR_FEATURE] = _bytes(text_pair)
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def fingerprint(source_fingerprints: list[str], config: DatasetConfig, label_names: list[str]) -> str:
    """Identifies the data a run consumed: the source's content fingerprints plus what we did with them."""
    payload = json.dumps({"sources": source_fingerprints, "config": to_dict(config), "labels": label_names})
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


class Executor(base_beam_executor.BaseBeamExecutor):
    def Do(self, input_dict, output_dict, exec_properties) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        config = load_dataset_config(exec_properties["dataset_config"])
        if exec_properties.get("revision"):
            config = dataclasses.replace(config, revision=exec_properties["revision"])
        if exec_properties.get("span"):
            config = dataclasses.replace(config, span=int(exec_properties["span"]))
        read = sources.read_dataset(config)
        config, prepared, window = read.config, read.prepared, read.window or (config.span,)
        if read.window:
            logging.info("span %d: reading spans %s", config.span, list(window))
        span = config.span
        examples = artifact_utils.get_single_instance(output_dict["examples"])
        names, rows = prepared.label_names, prepared.rows
        for name in TFX_SPLITS:
            logging.info("split %s: %d examples from %s", name, len(rows[name].texts), prepared.origin[name])
            if rows[name].dropped:
                logging.warning("split %s: %d rows dropped for a missing text or label", name, rows[name].dropped)

        label_tuple = tuple(names)
        examples.split_names = artifact_utils.encode_split_names(list(TFX_SPLITS))
        with self._make_beam_pipeline() as pipeline:
            for name in TFX_SPLITS:
                split = rows[name]
                _ = (
                    pipeline
                    | f"Create[{name}]" >> beam.Create(list(split.rows()), reshuffle=False)
                    | f"ToExample[{name}]" >> beam.Map(lambda row, names=label_tuple: to_example(*row, names))
                    | f"Write[{name}]"
                    >> beam.io.WriteToTFRecord(
                        os.path.join(artifact_utils.get_split_uri([examples], name), "data_tfrecord"),
                        file_name_suffix=".gz",
                        compression_type=beam.io.filesystem.CompressionTypes.GZIP,
                    )
                )

        examples.span = int(span)
        examples.version = 0
        examples_utils.set_payload_format(examples, example_gen_pb2.PayloadFormat.FORMAT_TF_EXAMPLE)
        examples_utils.set_file_format(examples, "tfrecords_gzip")
        examples.set_string_custom_property(LABEL_NAMES_PROPERTY, json.dumps(names))
        examples.set_string_custom_property(
            SPLIT_COUNTS_PROPERTY, json.dumps({n: len(rows[n].texts) for n in TFX_SPLITS})
        )
        examples.set_string_custom_property(DROPPED_COUNTS_PROPERTY, json.dumps(prepared.dropped))
        examples.set_string_custom_property(
            FINGERPRINT_PROPERTY, fingerprint(prepared.source_fingerprints, config, names)
        )
        examples.set_string_custom_property(SPANS_PROPERTY, json.dumps(list(window)))
        examples.set_string_custom_property(
            INPUT_FINGERPRINT_PROPERTY, exec_properties.get("input_fingerprint") or spans.files_fingerprint(config)
        )
