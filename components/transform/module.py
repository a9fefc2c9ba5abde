"""Transform's module: raw text -> fixed-length model inputs, tokenized in-graph with the model's vocab.

Named by path (`components.transform.module.preprocessing_fn`), so the pipeline compiles without building a wheel.
The same graph is applied at serving time, so training and serving tokenize identically.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the TF.Text ops in every Beam worker that loads this module)
import tensorflow_transform as tft

from components.transform.config import TransformSettings
from models.hub.pretrained import resolve_model_dir
from models.names import (
    INPUT_IDS,
    LABEL_FEATURE,
    LENGTH_BUCKET,
    TEXT_FEATURE,
    TEXT_PAIR_FEATURE,
    TOKEN_COUNT,
    TRUNCATED,
    UNKNOWN_TOKENS,
)
from models.tokenizers.tokenizer import InGraphTokenizer, tokenizer_spec


def length_bucket_names(edges) -> list[str]:
    """Token-count bucket labels for slicing: edges (16, 32) -> 0-16, 17-32, 33+."""
    lows = [0] + [e + 1 for e in edges]
    return [f"{lo}-{hi}" for lo, hi in zip(lows, edges, strict=False)] + [f"{lows[-1]}+"]


def length_bucket(token_count: tf.Tensor, edges) -> tf.Tensor:
    index = tf.searchsorted(tf.constant(list(edges), tf.int64), token_count, side="left")
    return tf.gather(tf.constant(length_bucket_names(edges)), index)


def vocab_asset_path(path: str) -> tf.Tensor:
    """The path of `path` as a SavedModel asset: tracked by TFT in TF2 mode, or TF1's ASSET_FILEPATHS when
    traced in a plain graph (tests, TF1 mode)."""
    if tf.compat.v1.executing_eagerly_outside_functions():
        return tft.make_and_track_object(lambda: tf.saved_model.Asset(path), name="vocab").asset_path
    constant = tf.constant(path)
    tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.ASSET_FILEPATHS, constant)
    return constant


def preprocessing_fn(inputs: dict[str, Any], custom_config: dict[str, Any]) -> dict[str, tf.Tensor]:
    settings = TransformSettings.from_custom_config(custom_config)
    model = settings.model
    spec = tokenizer_spec(resolve_model_dir(model.name, model.revision))
    # A vocab file the graph reads (WordPiece's) becomes an asset of the transform graph: copied into it, and
    # its path a captured asset the loader points at that copy. A constant path (even one listed in TF1's
    # ASSET_FILEPATHS, which TFT's TF2 export copies but does not substitute) would make every exported model
    # read the vocab where the training machine had it. The other families' tables are constants of the graph.
    vocab_path = None
    if spec.asset_path is not None:
        vocab_path = vocab_asset_path(spec.asset_path)

    texts = tf.reshape(inputs[TEXT_FEATURE], [-1])
    # Sentence-pair data carries text_pair (the ExampleGen writes it when dataset.text_pair_column is set).
    pairs = tf.reshape(inputs[TEXT_PAIR_FEATURE], [-1]) if TEXT_PAIR_FEATURE in inputs else None
    tokenizer = InGraphTokenizer(
        spec,
        int(model.max_seq_length),
        vocab_path=vocab_path,
        head_share=model.kept_head_share,  # model.long_texts: head_tail
        windows=model.windows,  # model.long_texts: windows: (stride, count)
    )
    features = tokenizer(texts, pairs)
    token_count, truncated = features.pop(TOKEN_COUNT), features.pop(TRUNCATED)
    outputs = dict(features)  # the model's inputs (and WINDOW_MASK)
    outputs[TOKEN_COUNT] = token_count
    outputs[TRUNCATED] = tf.cast(truncated, tf.int64)
    # How many kept tokens the vocab could not represent: the statistics show how well it covers the data
    # (in windows, a token two windows share counts twice).
    outputs[UNKNOWN_TOKENS] = tf.reduce_sum(tf.cast(tf.equal(features[INPUT_IDS], spec.unk_id), tf.int64), axis=1)
    outputs[LENGTH_BUCKET] = length_bucket(token_count, settings.length_slice_edges)
    if LABEL_FEATURE in inputs:  # a label id, or for multi-label the 0/1 vector over the label set
        label = inputs[LABEL_FEATURE]
        outputs[LABEL_FEATURE] = label if settings.multi_label else tf.reshape(label, [-1])
    return outputs
