"""The GPT-4 / Llama-3 pre-tokenizer split (tiktoken's cl100k pattern), in the graph: texts -> words.

Llama-3's byte-level BPE (EuroBERT's, and the encoders built from Llama-3 decoders) splits text with PATTERN
(tokenizers' Split, behavior Isolated) before ByteLevel maps bytes. Hand-written as flags over code points (see
code_points.py: RE2 has older Unicode tables and no lookahead), each alternative's rule where a word starts:
- `(?i:'s|'t|'re|'ve|'m|'ll|'d)`: where a word starts at an apostrophe, a contraction is a word of its own;
- `[^\\r\\n\\p{L}\\p{N}]?\\p{L}+`: a letter run, with the one character before it when that one starts a word and
  is neither a letter, a number nor \\r \\n (the last blank of a whitespace run, or a lone punctuation mark);
- `\\p{N}{1,3}`: numbers in threes from their run's start (DIGITS_PATTERN's `\\p{N}`: one by one);
- ` ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*`: a punctuation run, with the space before it and the \\r \\n right after it;
- `\\s*[\\r\\n]+`: whitespace up to the last \\r \\n of its run; then `\\s+(?!\\S)` and `\\s+` leave a run's last blank
  to the word after it.
"""

from __future__ import annotations

import tensorflow as tf

from models.tokenizers.code_points import (
    CodePoints,
    any_equal,
    any_pair_equal,
    cut_words,
    latest_flagged,
    position_in_run,
    run_starts,
)
from models.tokenizers.gpt2_classes import LETTER, NUMBER, OTHER, SPACE

PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
    r"\s+(?!\S)|\s+"
)
# The same with each digit a word of its own (`\p{N}`: Qwen2's, and the byte-level BPEs that split digits)
DIGITS_PATTERN = PATTERN.replace(r"\p{N}{1,3}|", r"\p{N}|")
NUMBER_RUNS = {PATTERN: 3, DIGITS_PATTERN: 1}  # each pattern's longest word of numbers
_SPACE, _APOSTROPHE, _NEWLINES = ord(" "), ord("'"), (ord("\n"), ord("\r"))
# the letters after an apostrophe that make a contraction, in any case (Unicode case folding: U+017F is an s)
_SHORT = tuple(map(ord, "stmdSTMD\u017f"))
_LONG = tuple((ord(a), ord(b)) for first, second in ("re", "ve", "ll") for a in (first, first.upper())
              for b in (second, second.upper()))  # fmt: skip


def split(texts: tf.Tensor, number_run: int = 3) -> tf.RaggedTensor:
    """texts [N] -> the words PATTERN's matches make, [N, (words)] (raw UTF-8); `number_run` 1: DIGITS_PATTERN's."""
    chars = CodePoints.of(texts)
    starts = _whitespace_starts(chars) | _letter_and_mark_starts(chars) | _number_starts(chars, number_run)
    return cut_words(texts, chars, starts)


def _whitespace_starts(chars: CodePoints) -> tf.Tensor:
    """Where `\\s*[\\r\\n]+`, `\\s+(?!\\S)` or `\\s+` begins a word."""
    space, newline = tf.equal(chars.kind, SPACE), any_equal(chars.point, _NEWLINES)
    blank = space & tf.logical_not(newline)
    after_marks = chars.before(tf.equal(chars.kind, OTHER), False)
    absorbed = newline & _spread_from_run_starts(newline, after_marks, chars)  # a punctuation run's [\r\n]*
    tail = blank & _spread_from_run_ends(blank, tf.logical_not(chars.after(newline, False)), chars)
    head = space & tf.logical_not(tail | absorbed)
    tail_end = tail & tf.logical_not(chars.after(tail, False)) & tf.logical_not(chars.last)
    return run_starts(head, chars) | run_starts(tail, chars) | tail_end


def _letter_and_mark_starts(chars: CodePoints) -> tf.Tensor:
    """Where a contraction, a letter run or a punctuation run begins a word."""
    letter, mark = tf.equal(chars.kind, LETTER), tf.equal(chars.kind, OTHER)
    next_kind = chars.after(chars.kind, -1)
    mark_start = run_starts(mark, chars)
    led_by_space = mark_start & tf.equal(chars.before(chars.point, -1), _SPACE)
    own_word = mark_start & tf.logical_not(led_by_space)
    lone_before_letter = own_word & tf.equal(next_kind, LETTER)
    next1 = chars.after(chars.point, -1)
    next2 = chars.after(next1, -1)
    apostrophe = lone_before_letter & tf.equal(chars.point, _APOSTROPHE)
    short = apostrophe & any_equal(next1, _SHORT)
    long = apostrophe & any_pair_equal(next1, next2, _LONG)
    inside = _moved(short | long, 1) | _moved(long, 2)
    after_contraction = _moved(short, 2) | _moved(long, 3)
    blank = tf.equal(chars.kind, SPACE) & tf.logical_not(any_equal(chars.point, _NEWLINES))
    blank_before_letter = blank & tf.equal(next_kind, LETTER)
    joins_letter = (lone_before_letter & tf.logical_not(short | long)) | blank_before_letter
    letter_start = (
        letter
        & (chars.first | tf.not_equal(chars.before(chars.kind, -1), LETTER) | after_contraction)
        & tf.logical_not(chars.before(joins_letter, False) | inside)
    )
    return letter_start | own_word


def _number_starts(chars: CodePoints, number_run: int) -> tf.Tensor:
    number = tf.equal(chars.kind, NUMBER)
    return number & tf.equal(position_in_run(number, chars) % number_run, 0)


def _moved(flags: tf.Tensor, by: int) -> tf.Tensor:
    """flags[i - by]: a flag carried `by` characters on (a contraction's end; a text's first character starts a
    word anyway, so one carried into the next text changes nothing)."""
    return tf.concat([tf.zeros([by], tf.bool), flags], axis=0)[: tf.size(flags)]


def _spread_from_run_starts(flags: tf.Tensor, values: tf.Tensor, chars: CodePoints) -> tf.Tensor:
    """Each flagged character gets `values` at the first character of its run."""
    return tf.gather(values, latest_flagged(run_starts(flags, chars)))


def _spread_from_run_ends(flags: tf.Tensor, values: tf.Tensor, chars: CodePoints) -> tf.Tensor:
    """Each flagged character gets `values` at the last character of its run."""
    reversed_chars = CodePoints(
        chars.point[::-1], chars.kind[::-1], chars.row[::-1], chars.offsets, chars.last[::-1], chars.first[::-1]
    )
    return _spread_from_run_starts(flags[::-1], values[::-1], reversed_chars)[::-1]
