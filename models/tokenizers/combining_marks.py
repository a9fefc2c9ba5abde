"""Runs of combining marks cut to 30 before any Unicode normalization in the graph: UAX #15's stream-safe bound.

Normalization puts each run of combining marks (non-starters: canonical combining class other than 0) in class
order, and ICU's reordering, which tensorflow_text's NormalizeUTF8 runs, is quadratic in a run's length: "a"
followed by 100,000 acute accents and then 100,000 grave-below ones took the served model 3.9 s for one request.
UAX #15's stream-safe text format bounds a run at 30 non-starters; past that no real text goes (the longest
canonical decomposition holds 18), so a mark past the 30th of its run is dropped, and every text with no longer run
keeps its ids. Hand-written because no TensorFlow or tensorflow_text op bounds runs of marks.
"""

from __future__ import annotations

import functools
import unicodedata

import tensorflow as tf

from models.tokenizers.code_points import CodePoints, position_in_run

MAX_NON_STARTERS = 30  # UAX #15, section 13 (Stream-Safe Text Format)
_LAST_NON_STARTER_PLANE_END = 0x20000  # no code point past plane 1 has a combining class (Unicode 15.1)


@functools.cache
def non_starter_ranges() -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(first, last) code points of each run of characters with a non-zero canonical combining class, in order."""
    firsts, lasts, start = [], [], None
    for point in range(_LAST_NON_STARTER_PLANE_END + 1):
        non_starter = point < _LAST_NON_STARTER_PLANE_END and unicodedata.combining(chr(point)) != 0
        if non_starter and start is None:
            start = point
        elif not non_starter and start is not None:
            firsts.append(start)
            lasts.append(point - 1)
            start = None
    return tuple(firsts), tuple(lasts)


def limit_combining_runs(texts: tf.Tensor, limit: int = MAX_NON_STARTERS) -> tf.Tensor:
    """texts [N] with every non-starter past the `limit`-th of its run dropped; texts without such a run as they
    are, byte for byte. Only texts holding more than `limit` non-ASCII characters in a row are decoded (every
    non-starter is non-ASCII): for English the check is one regex pass, a quarter of the tokenizer's time else."""
    texts = tf.reshape(texts, [-1])
    rows = tf.range(tf.size(texts))
    maybe = tf.strings.regex_full_match(texts, f"(?s).*[^\\x00-\\x7F]{{{limit + 1}}}.*")
    plain, marked = tf.boolean_mask(rows, tf.logical_not(maybe)), tf.boolean_mask(rows, maybe)
    limited = _limit_runs(tf.gather(texts, marked), limit)
    return tf.dynamic_stitch([plain, marked], [tf.gather(texts, plain), limited])


def _limit_runs(texts: tf.Tensor, limit: int) -> tf.Tensor:
    chars = CodePoints.of(texts)
    firsts, lasts = (tf.constant(values, tf.int32) for values in non_starter_ranges())
    index = tf.searchsorted(firsts, chars.point, side="right") - 1
    non_starter = (index >= 0) & (chars.point <= tf.gather(lasts, tf.maximum(index, 0)))
    dropped = non_starter & (position_in_run(non_starter, chars) >= limit)
    rows = tf.size(texts, out_type=tf.int64)
    rows_over = tf.math.unsorted_segment_max(tf.cast(dropped, tf.int32), chars.row, rows) > 0
    keep = tf.logical_not(dropped)
    kept = tf.RaggedTensor.from_value_rowids(
        tf.boolean_mask(chars.point, keep), tf.boolean_mask(chars.row, keep), nrows=rows, validate=False
    )
    return tf.where(rows_over, tf.strings.unicode_encode(kept, "UTF-8"), texts)
