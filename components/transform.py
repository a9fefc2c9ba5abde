"""Transform's module: raw text -> fixed-length model inputs, tokenized in-graph with the model's vocab.

Named by path (`components.transform.preprocessing_fn`), so the pipeline compiles without building a wheel.
The same graph is applied at serving time, so training and serving tokenize identically.
"""

from __future__ import annotations

import os
from typing import Any

import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the TF.Text ops in every Beam worker that loads this module)
import tensorflow_transform as tft
from tfx.components.transform import stats_options_util

from models.features import ATTENTION_MASK, LABEL_FEATURE, TEXT_FEATURE, TEXT_PAIR_FEATURE
from models.pretrained import resolve_model_dir
from models.tokenizer import InGraphTokenizer, tokenizer_spec

VOCAB_ASSET = "vocab"
MODEL_INPUT_FEATURES = ("input_ids", ATTENTION_MASK, "token_type_ids")
TOKEN_COUNT_FEATURE = "token_count"
TRUNCATED_FEATURE = "truncated"
LENGTH_BUCKET_FEATURE = "length_bucket"
# WordPiece special tokens, as the post-transform statistics name them.
PAD_TOKEN, UNKNOWN_TOKEN = "[PAD]", "[UNK]"
SPECIAL_TOKENS = (PAD_TOKEN, "[CLS]", "[SEP]")


def transform_custom_config(model_name: str, revision: str | None, max_seq_length: int, length_buckets) -> dict:
    """What preprocessing_fn needs, as the JSON-able dict the Transform component carries."""
    return {
        "model": model_name,
        "revision": revision,
        "max_seq_length": max_seq_length,
        "length_buckets": list(length_buckets),
    }


def length_bucket_names(edges) -> list[str]:
    """Token-count bucket labels for slicing: edges (16, 32) -> 0-16, 17-32, 33+."""
    lows = [0] + [e + 1 for e in edges]
    return [f"{lo}-{hi}" for lo, hi in zip(lows, edges, strict=False)] + [f"{lows[-1]}+"]


def length_bucket(token_count: tf.Tensor, edges) -> tf.Tensor:
    index = tf.searchsorted(tf.constant(list(edges), tf.int64), token_count, side="left")
    return tf.gather(tf.constant(length_bucket_names(edges)), index)


def preprocessing_fn(inputs: dict[str, Any], custom_config: dict[str, Any]) -> dict[str, tf.Tensor]:
    model_dir = resolve_model_dir(custom_config["model"], custom_config.get("revision"))
    spec = tokenizer_spec(model_dir)
    max_seq_length = int(custom_config["max_seq_length"])
    # The vocab becomes an asset of the transform graph (copied into it, path relocated on load), and is
    # named so post-transform statistics can read it.
    vocab_path = tf.constant(spec.vocab_path)
    tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.ASSET_FILEPATHS, vocab_path)
    tft.annotate_asset(VOCAB_ASSET, os.path.basename(spec.vocab_path))

    texts = tf.reshape(inputs[TEXT_FEATURE], [-1])
    # Sentence-pair data carries text_pair (the ExampleGen writes it when dataset.text_pair_column is set).
    pairs = tf.reshape(inputs[TEXT_PAIR_FEATURE], [-1]) if TEXT_PAIR_FEATURE in inputs else None
    features = InGraphTokenizer(spec, max_seq_length, vocab_path=vocab_path)(texts, pairs)
    token_count, truncated = features.pop("token_count"), features.pop("truncated")
    outputs = dict(features)
    outputs[TOKEN_COUNT_FEATURE] = token_count
    outputs[TRUNCATED_FEATURE] = tf.cast(truncated, tf.int64)
    outputs[LENGTH_BUCKET_FEATURE] = length_bucket(token_count, custom_config.get("length_buckets", (16, 32)))
    if LABEL_FEATURE in inputs:
        outputs[LABEL_FEATURE] = tf.reshape(inputs[LABEL_FEATURE], [-1])
    return outputs


def stats_options_updater_fn(stats_type, stats_options):
    """Post-transform statistics treat input_ids as natural language: [UNK] rate, coverage, lengths.

    Runs while the Beam pipeline is being built, before the vocab asset is written, so tokens are named
    by string and TFDV resolves them through the annotated vocab when it computes the statistics.
    """
    if stats_type != stats_options_util.StatsType.POST_TRANSFORM or stats_options.schema is None:
        return stats_options
    if VOCAB_ASSET not in (stats_options.vocab_paths or {}):
        return stats_options
    schema = stats_options.schema
    for feature in schema.feature:
        if feature.name != "input_ids":
            continue
        domain = feature.natural_language_domain
        domain.vocabulary = VOCAB_ASSET
        domain.coverage.excluded_string_tokens.extend(SPECIAL_TOKENS)
        domain.coverage.oov_string_tokens.append(UNKNOWN_TOKEN)
        domain.token_constraints.add().string_value = UNKNOWN_TOKEN
        domain.sequence_length_constraints.excluded_string_value.append(PAD_TOKEN)
    stats_options.schema = schema
    return stats_options
