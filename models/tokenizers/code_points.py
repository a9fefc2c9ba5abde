"""Texts as flat arrays of code points with `tokenizers`' Unicode classes, and words cut from them by flags.

The in-graph pre-tokenizers (GPT-2's split, the GPT-4 / Llama-3 split) decide where each word starts as
arithmetic over these arrays: RE2, TensorFlow's only regex engine, has older Unicode tables and no lookahead.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from models.tokenizers import gpt2_classes
from models.tokenizers.ragged_rows import row_ids

_CLASS_TABLE = gpt2_classes.boundaries()


@dataclasses.dataclass(frozen=True)
class CodePoints:
    """Every character of a batch of texts, flat: its code point, class, text (row) and byte offset."""

    point: tf.Tensor
    kind: tf.Tensor
    row: tf.Tensor
    offsets: tf.RaggedTensor
    first: tf.Tensor  # the first character of its text
    last: tf.Tensor  # the last character of its text

    @classmethod
    def of(cls, texts: tf.Tensor) -> CodePoints:
        points, offsets = tf.strings.unicode_decode_with_offsets(texts, "UTF-8")
        point, row = points.flat_values, row_ids(points)
        boundaries, classes = (tf.constant(values, tf.int32) for values in _CLASS_TABLE)
        kind = tf.gather(classes, tf.searchsorted(boundaries, point, side="right") - 1)
        first = tf.concat([[True], tf.not_equal(row[1:], row[:-1])], axis=0)
        last = tf.concat([tf.not_equal(row[1:], row[:-1]), [True]], axis=0)
        return cls(point, kind, row, offsets, first, last)

    def before(self, values: tf.Tensor, fill) -> tf.Tensor:
        """Each character's previous one's value in the same text (`fill` at a text's start)."""
        return tf.where(self.first, tf.constant(fill, values.dtype), shifted(values, 1, fill))

    def after(self, values: tf.Tensor, fill) -> tf.Tensor:
        """Each character's next one's value in the same text (`fill` at a text's end)."""
        return tf.where(self.last, tf.constant(fill, values.dtype), shifted(values, -1, fill))


def shifted(values: tf.Tensor, by: int, fill) -> tf.Tensor:
    """values moved `by` places (right if positive, left if negative), `fill` coming in: values[i - by]."""
    padding = tf.fill([abs(by)], tf.constant(fill, values.dtype))
    if by > 0:
        return tf.concat([padding, values], axis=0)[: tf.size(values)]
    return tf.concat([values, padding], axis=0)[-by:]


def any_equal(values: tf.Tensor, candidates: tuple[int, ...]) -> tf.Tensor:
    return tf.reduce_any(tf.equal(values[:, tf.newaxis], tf.constant(candidates)), axis=1)


def any_pair_equal(first: tf.Tensor, second: tf.Tensor, pairs: tuple[tuple[int, int], ...]) -> tf.Tensor:
    firsts, seconds = (tf.constant(values) for values in zip(*pairs, strict=True))
    return tf.reduce_any(tf.equal(first[:, tf.newaxis], firsts) & tf.equal(second[:, tf.newaxis], seconds), axis=1)


def cut_words(texts: tf.Tensor, chars: CodePoints, starts_word: tf.Tensor) -> tf.RaggedTensor:
    """The words that begin at the characters flagged in `starts_word`, cut from `texts` by byte offsets.

    Linear in the texts' bytes: each byte is given the word it belongs to and the words are joined from their
    bytes in one pass (cutting each word from its whole text, `substr(gather(texts, word_row))`, copies the text
    once a word: words x bytes, 2 GB for a 65,000-character text of one-letter words)."""
    at = tf.where(starts_word)[:, 0]
    word_row = tf.gather(chars.row, at)
    text_bytes = tf.strings.bytes_split(texts)
    byte_row = row_ids(text_bytes)
    total = tf.size(text_bytes.flat_values, out_type=tf.int64)
    begin = tf.gather(text_bytes.row_starts(), word_row) + tf.cast(tf.gather(chars.offsets.flat_values, at), tf.int64)
    word_of_byte = tf.cumsum(tf.math.unsorted_segment_sum(tf.ones_like(begin), begin, total)) - 1
    words = tf.size(at, out_type=tf.int64)
    # a byte before its text's first word belongs to none (the last slot, dropped)
    owner_row = tf.gather(tf.concat([word_row, [-1]], axis=0), tf.where(word_of_byte >= 0, word_of_byte, words))
    segment = tf.where(tf.equal(owner_row, byte_row), word_of_byte, words)
    joined = tf.strings.unsorted_segment_join(text_bytes.flat_values, segment, words + 1)[:words]
    return tf.RaggedTensor.from_value_rowids(joined, word_row, nrows=tf.size(texts, out_type=tf.int64), validate=False)


def run_starts(flags: tf.Tensor, chars: CodePoints) -> tf.Tensor:
    """Where a run of consecutive flagged characters of one text begins."""
    return flags & tf.logical_not(chars.before(flags, False))


def position_in_run(flags: tf.Tensor, chars: CodePoints) -> tf.Tensor:
    """Each flagged character's place in its run (0 for the run's first); meaningless where not flagged."""
    positions = tf.range(tf.size(flags, out_type=tf.int64))
    starts = run_starts(flags, chars)
    run_start = tf.gather(tf.where(starts, positions, 0), latest_flagged(starts))
    return positions - run_start


def latest_flagged(flags: tf.Tensor) -> tf.Tensor:
    """For each place, the index of the last True at or before it (0 if none): the latest flagged position, read
    through a running count of flagged places (no sequential scan)."""
    positions = tf.range(tf.size(flags, out_type=tf.int64))
    flagged = tf.concat([[0], tf.boolean_mask(positions, flags)], axis=0)
    return tf.gather(flagged, tf.cumsum(tf.cast(flags, tf.int64)))
