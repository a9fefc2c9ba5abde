"""Texts cut to a bound on their characters before the in-graph tokenizer, so one request's work is bounded.

Every family's tokenizer is at least linear in a text's length, and byte-level BPE's merge rounds are worse on
one long word (a 1.4 MB text without spaces kept a model thread busy for minutes). A model reads at most its
width in tokens, and one token stands for at most `token_chars` characters of text other than whitespace (the
longest vocab entry; WordPiece's longest word it will split), so a text's first `width x token_chars`
non-whitespace characters already hold every token the model keeps. The cut keeps twice that, so a word the
cut splits changes tokens far past the last one kept. Whitespace is counted only where the family makes tokens of
it: byte-level BPE keeps every whitespace run as pre-tokens, so a text of blanks alone (1.4 MB of spaces: 1.4 M
tokens, 18 s and 8 GB in one model call) must spend the budget too, and since each of its tokens stands for at most
`token_chars` characters of any kind, a text the width holds whole is never cut. WordPiece and SentencePiece drop
whitespace runs, so there a run of blanks never shortens the text kept. Hand-written because no TF or
tensorflow_text op cuts by a count of some characters.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from models.tokenizers.ragged_rows import row_ids

# Unicode's White_Space property: what no family turns into a token of its own that carries text.
_WHITESPACE = (
    *range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F, 0x205F, 0x3000,
)  # fmt: skip
MARGIN = 2  # characters kept per character the model's tokens can reach
# The most characters one token counts for: GPT-2's longest entries are 128 bytes, WordPiece's default longest word
# 100; a folder with longer entries (one of 1 MB turned the budget off) is counted at this, and `--check` says so.
TOKEN_CHARS_CAP = 128


@dataclasses.dataclass(frozen=True)
class CharacterBudget:
    """How many characters a text keeps from its start (`head`) and from its end (`tail`): whitespace not counted
    unless `counts_whitespace` (the family makes tokens of it)."""

    head: int
    tail: int = 0
    counts_whitespace: bool = False

    @classmethod
    def reaching(
        cls, tokens: int, token_chars: int, keep_tail: bool = False, counts_whitespace: bool = False
    ) -> CharacterBudget:
        """The budget that keeps every character `tokens` tokens of at most `token_chars` characters can reach,
        from the start (and, for head_tail texts, from the end as well)."""
        chars = MARGIN * tokens * token_chars
        return cls(chars, chars if keep_tail else 0, counts_whitespace)

    def describe(self) -> str:
        counted = "whitespace counted" if self.counts_whitespace else "whitespace not counted"
        if self.tail:
            return f"its first and last {self.head:,} characters ({counted})"
        return f"its first {self.head:,} characters ({counted})"


def cut_texts(texts: tf.Tensor, budget: CharacterBudget) -> tf.Tensor:
    """texts [N] with more than head + tail counted characters cut to their first `head` and last `tail` of them
    (uncounted whitespace among the kept ones stays); the rest as they are. Bytes that are not UTF-8 count as
    one character each, as the tokenizers' own decoding replaces them. Only texts of more bytes than the budget
    has characters are decoded: the others cannot be over it, so a batch of ordinary texts costs one length."""
    texts = tf.reshape(texts, [-1])
    rows = tf.range(tf.size(texts))
    long = tf.strings.length(texts, unit="BYTE") > budget.head + budget.tail
    short_rows, long_rows = tf.boolean_mask(rows, tf.logical_not(long)), tf.boolean_mask(rows, long)
    cut = _cut_long(tf.gather(texts, long_rows), budget)
    return tf.dynamic_stitch([short_rows, long_rows], [tf.gather(texts, short_rows), cut])


def _cut_long(texts: tf.Tensor, budget: CharacterBudget) -> tf.Tensor:
    points, offsets = tf.strings.unicode_decode_with_offsets(texts, "UTF-8", errors="replace")
    flat = points.flat_values
    if budget.counts_whitespace:
        solid = tf.ones_like(flat, tf.int64)
    else:
        solid = tf.cast(tf.logical_not(tf.reduce_any(tf.equal(flat[:, tf.newaxis], _WHITESPACE), axis=1)), tf.int64)
    rows, starts = row_ids(points), points.row_starts()
    running = tf.cumsum(solid)
    before_row = tf.gather(tf.concat([[0], running], axis=0), starts)
    upto = running - tf.gather(before_row, rows)  # non-whitespace characters up to and including each one
    total = tf.math.unsorted_segment_sum(solid, rows, tf.size(texts, out_type=tf.int64))
    byte_length = tf.strings.length(texts, unit="BYTE")
    chars = points.row_lengths()

    def byte_offset(char_index: tf.Tensor) -> tf.Tensor:
        """The byte where each row's character `char_index` starts (the row's end past its last character)."""
        inside = char_index < chars
        starts_of = tf.concat([offsets.flat_values, [0]], axis=0)  # a slot past the end: rows may all be empty
        at = tf.gather(starts_of, starts + tf.minimum(char_index, tf.maximum(chars - 1, 0)))
        return tf.where(inside, tf.cast(at, tf.int64), tf.cast(byte_length, tf.int64))

    in_head = tf.math.unsorted_segment_sum(tf.cast(upto <= budget.head, tf.int64), rows, tf.size(chars))
    head_end = byte_offset(in_head)
    head = tf.strings.substr(texts, tf.zeros_like(head_end), head_end, unit="BYTE")
    if budget.tail:
        from_end = tf.gather(total, rows) - (upto - solid)  # non-whitespace characters from each one to the end
        in_tail = tf.math.unsorted_segment_sum(tf.cast(from_end <= budget.tail, tf.int64), rows, tf.size(chars))
        tail_start = byte_offset(chars - in_tail)
        head = head + tf.strings.substr(texts, tail_start, tf.cast(byte_length, tf.int64) - tail_start, unit="BYTE")
    return tf.where(total > budget.head + budget.tail, head, texts)
