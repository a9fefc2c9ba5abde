"""Writes the dataset as gzipped tf.Example TFRecords under Split-<name>/, one Beam pipeline for all splits.

Rows are read shard by shard inside the Beam workers (`beam_rows`); the launching process lists shards and
reads counters, so its memory does not grow with the data, and on Dataflow the job graph carries no rows.

Each example has the features of `models.names`: `text`, `text_pair` for sentence pairs, `label` (int64
id, 0 included: TFX's parquet path drops falsy values) and `label_name`; and each of evaluation.slice_columns,
as a string, for the Evaluator's slices. The label set, the dataset
fingerprint, per-split counts, rows dropped for missing values and the span go on the output artifact.
"""

from __future__ import annotations

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

from components.example_gen import beam_rows
from components.example_gen.config import TFX_SPLITS, DatasetConfig, load_dataset_config
from components.example_gen.dataset_pass import check_splits, dataset_pass
from models.hub.hub_token import load_hub_token
from models.names import (
    DROPPED_COUNTS_PROPERTY,
    FINGERPRINT_PROPERTY,
    INPUT_FINGERPRINT_PROPERTY,
    LABEL_COUNTS_PROPERTY,
    LABEL_FEATURE,
    LABEL_NAME_FEATURE,
    LABEL_NAMES_PROPERTY,
    SPANS_PROPERTY,
    SPLIT_COUNTS_PROPERTY,
    TEXT_FEATURE,
    TEXT_PAIR_FEATURE,
)


def _bytes(value: str) -> tf.train.Feature:
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode("utf-8")]))


def to_example(
    text: str,
    text_pair: str | None,
    label_ids: tuple[int, ...],
    label_names: tuple[str, ...],
    multi_label: bool,
    slices: dict[str, str] | None = None,
) -> bytes:
    """`label` is the id, or for multi-label the 0/1 vector over the label set; `label_name` the name(s);
    `slices` the row's value of each evaluation slice column, as a string."""
    ids = [int(i in label_ids) for i in range(len(label_names))] if multi_label else list(label_ids)
    names = [label_names[i].encode("utf-8") for i in label_ids]
    feature = {
        TEXT_FEATURE: _bytes(text),
        LABEL_FEATURE: tf.train.Feature(int64_list=tf.train.Int64List(value=ids)),
        LABEL_NAME_FEATURE: tf.train.Feature(bytes_list=tf.train.BytesList(value=names)),
    }
    if text_pair is not None:
        feature[TEXT_PAIR_FEATURE] = _bytes(text_pair)
    for column, value in (slices or {}).items():
        feature[column] = _bytes(value)
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def fingerprint(source_fingerprints: list[str], config: DatasetConfig, label_names: list[str]) -> str:
    """Identifies the data a run consumed: the source's content fingerprints plus what we did with them."""
    payload = json.dumps(
        {"sources": source_fingerprints, "config": config.model_dump(mode="json"), "labels": label_names}
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


class Executor(base_beam_executor.BaseBeamExecutor):
    def Do(self, input_dict, output_dict, exec_properties) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        # The first component: a cloud run whose Hub token cannot be read stops here, before any training.
        load_hub_token()
        config = load_dataset_config(exec_properties["dataset_config"])
        if exec_properties.get("revision"):
            config = config.model_copy(update={"revision": exec_properties["revision"]})
        if exec_properties.get("span"):
            config = config.model_copy(update={"span": int(exec_properties["span"])})
        found = dataset_pass(
            config,
            None,
            lambda read: beam_rows.distinct_label_values(self._make_beam_pipeline(), read, self._get_tmp_dir()),
        )
        read, names = found.read, found.label_names
        if read.window:
            logging.info("span %d: reading spans %s", read.config.span, list(read.window))
        logging.info("%d shard(s) to read: %s", len(read.shards), [s.name for s in read.shards][:20])
        examples = artifact_utils.get_single_instance(output_dict["examples"])
        examples.split_names = artifact_utils.encode_split_names(list(TFX_SPLITS))
        label_counts, dropped, rows = self._write_examples(read, names, examples)
        for name in TFX_SPLITS:
            count, origin = rows[name], read.plan.origin[name]
            logging.info("split %s: %d examples from %s", name, count, origin)
            if dropped[name]:
                logging.warning("split %s: %d rows dropped for a missing text or label", name, dropped[name])
        check_splits(read, names, label_counts, rows)
        record_examples(examples, read, names, (label_counts, dropped, rows), exec_properties.get("input_fingerprint"))

    def _write_examples(self, read, names: list[str], examples):
        """Every split's rows as gzipped tf.Example TFRecords; (label counts, dropped rows, rows) per split."""
        label_tuple, multi_label, slice_columns = tuple(names), read.config.multi_label, read.config.slice_columns
        with self._make_beam_pipeline() as pipeline:
            for name, rows in beam_rows.read_rows(pipeline, read, names).items():
                _ = (
                    rows
                    | f"ToExample[{name}]"
                    >> beam.Map(
                        lambda r, names=label_tuple: to_example(
                            r.text,
                            r.text_pair,
                            r.label_ids,
                            names,
                            multi_label,
                            dict(zip(slice_columns, r.slices, strict=True)),
                        )
                    )
                    | f"Write[{name}]"
                    >> beam.io.WriteToTFRecord(
                        os.path.join(artifact_utils.get_split_uri([examples], name), "data_tfrecord"),
                        file_name_suffix=".gz",
                        compression_type=beam.io.filesystem.CompressionTypes.GZIP,
                    )
                )
        return beam_rows.split_counts(beam_rows.counters(pipeline.result), TFX_SPLITS)


def record_examples(examples, read, names: list[str], counts, input_fingerprint: str | None) -> None:
    """What the examples artifact says about itself: span, format, labels, counts, fingerprints, spans read."""
    label_counts, dropped, rows = counts
    config, window = read.config, read.window or (read.config.span,)
    examples.span = int(config.span)
    examples.version = 0
    examples_utils.set_payload_format(examples, example_gen_pb2.PayloadFormat.FORMAT_TF_EXAMPLE)
    examples_utils.set_file_format(examples, "tfrecords_gzip")
    examples.set_string_custom_property(LABEL_NAMES_PROPERTY, json.dumps(names))
    examples.set_string_custom_property(SPLIT_COUNTS_PROPERTY, json.dumps({n: rows[n] for n in TFX_SPLITS}))
    per_label = {n: {names[i]: c for i, c in sorted(label_counts[n].items())} for n in TFX_SPLITS}
    examples.set_string_custom_property(LABEL_COUNTS_PROPERTY, json.dumps(per_label, ensure_ascii=False))
    examples.set_string_custom_property(DROPPED_COUNTS_PROPERTY, json.dumps(dropped))
    examples.set_string_custom_property(FINGERPRINT_PROPERTY, fingerprint(read.fingerprint_sources, config, names))
    examples.set_string_custom_property(SPANS_PROPERTY, json.dumps(list(window)))
    examples.set_string_custom_property(INPUT_FINGERPRINT_PROPERTY, input_fingerprint or read.input_fingerprint)
