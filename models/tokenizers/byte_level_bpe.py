"""In-graph byte-level BPE (RoBERTa, DistilRoBERTa, GPT-2 style): texts -> the ids HF's fast tokenizer gives.

Read from the model's tokenizer.json (vocab, merges, ByteLevel's add_prefix_space) and written with TF core
ops only. Hand-written because no library offers it as TF ops that run inside a Transform: keras-hub's
BytePairTokenizer keeps a mutable cache table that TFT cannot trace, and tensorflow_text has no BPE op.

The steps are the `tokenizers` library's: the GPT-2 split (its regex's rules applied to code points classed
by `tokenizers`' own Unicode tables, see pre_tokenize), each byte mapped to GPT-2's printable stand-in, then
merges applied lowest rank first. Each distinct word of a batch is merged once; words that are whole vocab
entries are looked up; a word of over MAX_WORD_BYTES bytes is merged in pieces of that size.
"""

from __future__ import annotations

import dataclasses
import json

import tensorflow as tf
import tensorflow_text

from models.tokenizers import gpt2_classes
from models.tokenizers.tokenizer_errors import UnsupportedTokenizerError

_NO_RANK = 2**62
_APOSTROPHE, _SPACE = ord("'"), ord(" ")
# GPT-2's contractions after the apostrophe: one letter, or two
_CONTRACTIONS_1, _CONTRACTIONS_2 = tuple(map(ord, "stmd")), tuple((ord(a), ord(b)) for a, b in ("re", "ve", "ll"))


def bytes_to_unicode() -> list[str]:
    """GPT-2's printable stand-in for each byte value (the table `tokenizers`' ByteLevel uses)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    stand_ins, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            stand_ins[byte] = chr(byte)
        else:
            stand_ins[byte] = chr(256 + extra)
            extra += 1
    return [stand_ins[byte] for byte in range(256)]


@dataclasses.dataclass(frozen=True)
class ByteLevelBPESpec:
    """A byte-level BPE tokenizer.json as the graph's tables want it, worked out once per model (the Transform
    builds the graph about nine times): merges as int64 pair keys (left id * vocab_size + right id) with the
    id each makes, in rank order."""

    vocab_size: int
    byte_ids: tuple[int, ...]  # the id of each byte's GPT-2 stand-in
    merge_keys: tuple[int, ...]
    merged_ids: tuple[int, ...]
    add_prefix_space: bool
    unk_id: int
    # Words (raw text) that BPE turns into one token, and that token's id: looked up before any merging.
    whole_words: tuple[str, ...] = ()
    whole_word_ids: tuple[int, ...] = ()
    nfc: bool = False  # texts NFC-normalized first (ModernBERT's tokenizer.json declares it)

    @classmethod
    def from_tokenizer_json(cls, tokenizer_json: dict, unk_id: int) -> ByteLevelBPESpec:
        byte_level = _checked_byte_level_step(tokenizer_json)
        model = tokenizer_json["model"]
        vocab: dict[str, int] = model["vocab"]
        size = max(vocab.values()) + 1
        merges = [m.split(" ", 1) if isinstance(m, str) else m for m in model["merges"]]
        merges = [(a, b) for a, b in merges if a in vocab and b in vocab and a + b in vocab]
        whole = _whole_words(tokenizer_json)
        return cls(
            vocab_size=size,
            byte_ids=tuple(vocab.get(c, unk_id) for c in bytes_to_unicode()),
            merge_keys=tuple(vocab[a] * size + vocab[b] for a, b in merges),
            merged_ids=tuple(vocab[a + b] for a, b in merges),
            add_prefix_space=bool(byte_level.get("add_prefix_space")),
            unk_id=unk_id,
            whole_words=tuple(text for text, _ in whole),
            whole_word_ids=tuple(token_id for _, token_id in whole),
            nfc=(tokenizer_json.get("normalizer") or {}).get("type") == "NFC",
        )


def _whole_words(tokenizer_json: dict) -> tuple[tuple[str, int], ...]:
    """Vocab entries that the model's own BPE (run by `tokenizers`) gives back as themselves, as raw text.

    Most words of a text are such entries ("Ġthe", "Ġmovie"): a hash lookup gives their id, and only the
    rest go through the merge rounds. Asking `tokenizers` for each entry keeps this exact: an entry the merges
    would not rebuild is left to them.
    """
    from tokenizers import Tokenizer

    backend = Tokenizer.from_str(
        json.dumps(
            {
                **tokenizer_json,
                "normalizer": None,
                "pre_tokenizer": None,
                "post_processor": None,
                "decoder": None,
                "added_tokens": [],
            }
        )
    )
    raw_byte = {stand_in: byte for byte, stand_in in enumerate(bytes_to_unicode())}
    found = []
    for token, token_id in tokenizer_json["model"]["vocab"].items():
        if not all(c in raw_byte for c in token):
            continue
        try:
            text = bytes(raw_byte[c] for c in token).decode("utf-8")
        except UnicodeDecodeError:
            continue
        if [t.id for t in backend.model.tokenize(token)] == [token_id]:
            found.append((text, token_id))
    return tuple(found)


def _checked_byte_level_step(tokenizer_json: dict) -> dict:
    """The ByteLevel pre-tokenizer step, after refusing what this graph does not reproduce: a normalizer other than
    NFC, pre-tokenizer steps besides ByteLevel's regex split, subword prefixes or suffixes, dropout."""
    if (tokenizer_json.get("normalizer") or {}).get("type", "NFC") != "NFC":
        raise UnsupportedTokenizerError(f"normalizer {tokenizer_json['normalizer'].get('type')} before ByteLevel")
    pre = tokenizer_json["pre_tokenizer"]
    steps = pre.get("pretokenizers", [pre])
    if [step["type"] for step in steps] != ["ByteLevel"] or not steps[0].get("use_regex", True):
        raise UnsupportedTokenizerError(f"pre-tokenizer {[step['type'] for step in steps]} without GPT-2's split")
    model = tokenizer_json["model"]
    for option in ("continuing_subword_prefix", "end_of_word_suffix", "dropout"):
        if model.get(option):
            raise UnsupportedTokenizerError(f"BPE option {option}={model[option]!r}")
    return steps[0]


def pre_tokenize(texts: tf.Tensor, add_prefix_space: bool) -> tf.RaggedTensor:
    """texts [N] -> the words ByteLevel's pre-tokenizer makes, [N, words] (raw UTF-8, before byte mapping).

    GPT-2's regex applied as arithmetic on code points: each character's class (letter, number, whitespace,
    other) from `tokenizers`' own Unicode tables (models/tokenizers/gpt2_classes.py), then where the pattern starts a
    word. Hand-written because RE2, the only regex engine in TensorFlow, has older Unicode tables and no
    lookahead (`\\s+(?!\\S)`), and its capturing split was most of the tokenizer's time.
    """
    if add_prefix_space:
        texts = tf.where(tf.strings.regex_full_match(texts, "(?s) .*"), texts, " " + texts)
    points, offsets = tf.strings.unicode_decode_with_offsets(texts, "UTF-8")
    point, row = points.flat_values, points.value_rowids()
    boundaries, classes = (tf.constant(values, tf.int32) for values in _CLASS_TABLE)
    kind = tf.gather(classes, tf.searchsorted(boundaries, point, side="right") - 1)
    first = tf.concat([[True], tf.not_equal(row[1:], row[:-1])], axis=0)
    last = tf.concat([tf.not_equal(row[1:], row[:-1]), [True]], axis=0)
    before = tf.where(first, -1, _shifted(kind, 1, -1))  # the previous character's class in the same text
    before_point = tf.where(first, -1, _shifted(point, 1, -1))
    after = tf.where(last, -1, _shifted(kind, -1, -1))
    space = tf.equal(kind, gpt2_classes.SPACE)
    # A whitespace run's last character before a word: `\\s+(?!\\S)` leaves it out of the run, so it starts a
    # word of its own, or, when it is " ", the word after it (` ?\\p{L}+` and its siblings take it).
    last_before_word = space & tf.logical_not(last) & tf.not_equal(after, gpt2_classes.SPACE)
    joined = _shifted(last_before_word & tf.equal(point, _SPACE), 1, False)
    # A contraction ('s 't 're 've 'm 'll 'd) is matched where a word starts at the apostrophe: at the text's
    # start, after a letter or number, or after whitespace that stays a word of its own.
    next1, next2 = _shifted(point, -1, -1), _shifted(point, -2, -1)
    row_has_1 = tf.logical_not(last)
    row_has_2 = row_has_1 & tf.logical_not(_shifted(last, -1, True))
    word_starts_here = (
        first
        | tf.equal(before, gpt2_classes.LETTER)
        | tf.equal(before, gpt2_classes.NUMBER)
        | (tf.equal(before, gpt2_classes.SPACE) & tf.not_equal(before_point, _SPACE))
    )
    apostrophe = tf.equal(point, _APOSTROPHE) & word_starts_here
    short = apostrophe & row_has_1 & _any_equal(next1, _CONTRACTIONS_1)  # 's 't 'm 'd
    long = apostrophe & row_has_2 & _any_pair_equal(next1, next2, _CONTRACTIONS_2)  # 're 've 'll
    inside = _shifted(short | long, 1, False) | _shifted(long, 2, False)
    after_contraction = _shifted(short, 2, False) | _shifted(long, 3, False)
    new_class = tf.not_equal(before, kind)
    starts_word = tf.where(
        space,
        first | new_class | last_before_word,
        (first | new_class) & tf.logical_not(joined) & tf.logical_not(inside),
    )
    return _cut(texts, offsets, starts_word | short | long | after_contraction, row)


def _shifted(values: tf.Tensor, by: int, fill) -> tf.Tensor:
    """values moved `by` places (right if positive, left if negative), `fill` coming in: values[i - by]."""
    padding = tf.fill([abs(by)], tf.constant(fill, values.dtype))
    if by > 0:
        return tf.concat([padding, values], axis=0)[: tf.size(values)]
    return tf.concat([values, padding], axis=0)[-by:]


def _any_equal(values: tf.Tensor, candidates: tuple[int, ...]) -> tf.Tensor:
    return tf.reduce_any(tf.equal(values[:, tf.newaxis], tf.constant(candidates)), axis=1)


def _any_pair_equal(first: tf.Tensor, second: tf.Tensor, pairs: tuple[tuple[int, int], ...]) -> tf.Tensor:
    firsts, seconds = (tf.constant(values) for values in zip(*pairs, strict=True))
    return tf.reduce_any(tf.equal(first[:, tf.newaxis], firsts) & tf.equal(second[:, tf.newaxis], seconds), axis=1)


def _cut(texts: tf.Tensor, offsets: tf.RaggedTensor, starts_word: tf.Tensor, row: tf.Tensor) -> tf.RaggedTensor:
    """The words that begin at the characters flagged in `starts_word`, cut from `texts` by byte offsets."""
    at = tf.where(starts_word)[:, 0]
    word_row = tf.gather(row, at)
    begin = tf.gather(offsets.flat_values, at)
    next_begin = tf.concat([begin[1:], [-1]], axis=0)
    same_row = tf.concat([tf.equal(word_row[1:], word_row[:-1]), [False]], axis=0)
    text_length = tf.gather(tf.strings.length(texts), word_row)
    end = tf.where(same_row, next_begin, tf.cast(text_length, begin.dtype))
    words = tf.strings.substr(tf.gather(texts, word_row), begin, end - begin)
    return tf.RaggedTensor.from_value_rowids(words, word_row, nrows=tf.size(texts, out_type=tf.int64), validate=False)


_CLASS_TABLE = gpt2_classes.boundaries()


# Merge rounds run until no pair of a word merges: one round per merge a word needs, so a word of n bytes costs up
# to n rounds over the batch (about 10 s for 20,000 letters of spaceless English: make bench-inputs). A word longer
# than this is merged in pieces of this many bytes, side by side: the ids are transformers' own for every word up
# to it (real words, URLs and numbers are split far shorter by GPT-2's pattern), and the rounds stay bounded.
MAX_WORD_BYTES = 256


class ByteLevelBPE:
    """texts [N] -> HF ids [N, tokens] (ragged), special tokens not added.

    Merges work on token ids: every symbol a merge makes is in the vocab, so a pair is an int64 key looked up
    for its rank and the id it merges into (no string work per round).
    """

    def __init__(self, spec: ByteLevelBPESpec, max_word_bytes: int = MAX_WORD_BYTES):
        self.spec = spec
        self.max_word_bytes = max_word_bytes  # benchmarks/bounded_inputs.py measures a word merged whole too
        self._size = spec.vocab_size
        self._byte_ids = tf.constant(spec.byte_ids, tf.int64)
        keys = tf.constant(spec.merge_keys, tf.int64)
        self._ranks = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(keys, tf.range(len(spec.merge_keys), dtype=tf.int64)), _NO_RANK
        )
        self._merged = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(keys, tf.constant(spec.merged_ids, tf.int64)), spec.unk_id
        )
        self._whole_words = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(spec.whole_words, tf.string),
                tf.constant(spec.whole_word_ids, tf.int64),
                tf.string,
                tf.int64,
            ),
            -1,
        )

    def __call__(self, texts: tf.Tensor) -> tf.RaggedTensor:
        texts = tf.reshape(texts, [-1])
        if self.spec.nfc:
            texts = tensorflow_text.normalize_utf8(texts, "NFC")
        words = pre_tokenize(texts, self.spec.add_prefix_space)
        words = _pieces_of_long_words(words, self.max_word_bytes)
        distinct, where = tf.unique(words.flat_values)
        whole = self._whole_words.lookup(distinct)
        hit_rows, miss_rows = tf.where(whole >= 0)[:, 0], tf.where(whole < 0)[:, 0]
        hits = tf.RaggedTensor.from_row_lengths(tf.gather(whole, hit_rows), tf.ones_like(hit_rows))
        byte_values = _bytes_of(tf.gather(distinct, miss_rows))
        merged = self._merge(byte_values.with_flat_values(tf.gather(self._byte_ids, byte_values.flat_values)))
        ids = tf.gather(
            tf.concat([hits, merged], axis=0), tf.math.invert_permutation(tf.concat([hit_rows, miss_rows], axis=0))
        )
        per_word = tf.gather(ids, where)  # [words, tokens]
        row_splits = tf.gather(per_word.row_splits, words.row_splits)
        return tf.RaggedTensor.from_row_splits(per_word.flat_values, row_splits, validate=False)

    def _merge(self, symbols: tf.RaggedTensor) -> tf.RaggedTensor:
        """Applies merges to every word until none applies, as `tokenizers`' BPE does.

        Each round merges, in every word, all occurrences of that word's lowest-ranked pair, left to right
        without overlap. `tokenizers` merges one occurrence at a time, lowest (rank, position) first; the two
        agree because a merge that uses a merged token always ranks after the merge that made it.
        """
        words = symbols.nrows()

        def round_(ids, row_ids, _):
            keys = ids[:-1] * self._size + ids[1:]
            same_word = tf.equal(row_ids[1:], row_ids[:-1])
            ranks = tf.where(same_word, self._ranks.lookup(keys), _NO_RANK)
            best = tf.math.unsorted_segment_min(ranks, row_ids[:-1], words)
            chosen = (ranks < _NO_RANK) & tf.equal(ranks, tf.gather(best, row_ids[:-1]))
            starts = tf.concat([_every_other_in_runs(chosen), [False]], axis=0)  # pairs merged this round
            absorbed = tf.concat([[False], starts[:-1]], axis=0)  # their right halves
            merged = tf.where(starts, self._merged.lookup(tf.concat([keys, [0]], axis=0)), ids)
            keep = tf.logical_not(absorbed)
            return tf.boolean_mask(merged, keep), tf.boolean_mask(row_ids, keep), tf.reduce_any(starts)

        ids, row_ids, _ = tf.while_loop(
            lambda ids, row_ids, changed: changed,
            round_,
            (symbols.flat_values, symbols.value_rowids(), tf.size(symbols.flat_values) > 1),
            shape_invariants=(tf.TensorShape([None]), tf.TensorShape([None]), tf.TensorShape([])),
        )
        return tf.RaggedTensor.from_value_rowids(ids, row_ids, nrows=words, validate=False)


def _pieces_of_long_words(words: tf.RaggedTensor, limit: int = MAX_WORD_BYTES) -> tf.RaggedTensor:
    """[texts, words] -> [texts, pieces]: each word as it is, or cut into pieces of `limit` bytes."""
    lengths = tf.strings.length(words.flat_values)
    counts = tf.maximum(1, (lengths + limit - 1) // limit)
    owner = tf.repeat(tf.range(tf.size(lengths)), counts)
    starts = (tf.range(tf.reduce_sum(counts)) - tf.gather(tf.cumsum(counts, exclusive=True), owner)) * limit
    pieces = tf.strings.substr(tf.gather(words.flat_values, owner), starts, tf.fill(tf.shape(starts), limit))
    row_counts = tf.math.unsorted_segment_sum(tf.cast(counts, tf.int64), words.value_rowids(), words.nrows())
    return tf.RaggedTensor.from_row_lengths(pieces, row_counts, validate=False)


def _bytes_of(strings: tf.Tensor) -> tf.RaggedTensor:
    """strings [N] -> their byte values, ragged [N, bytes]."""
    single_bytes = tf.strings.bytes_split(strings)
    values = tf.reshape(tf.io.decode_raw(single_bytes.flat_values, tf.uint8, fixed_length=1), [-1])
    return single_bytes.with_flat_values(tf.cast(values, tf.int32))


def _every_other_in_runs(chosen: tf.Tensor) -> tf.Tensor:
    """In each run of consecutive True, the 1st, 3rd, 5th ...: the leftmost non-overlapping pairs."""
    positions = tf.range(tf.size(chosen))
    run_start = tf.logical_and(chosen, tf.logical_not(tf.concat([[False], chosen[:-1]], axis=0)))
    run_ids = tf.cumsum(tf.cast(run_start, tf.int32)) - 1
    first = tf.math.unsorted_segment_min(
        tf.where(run_start, positions, tf.size(chosen)),
        tf.maximum(run_ids, 0),
        tf.maximum(tf.reduce_max(run_ids), 0) + 1,
    )
    offset = positions - tf.gather(first, tf.maximum(run_ids, 0))
    return chosen & tf.equal(offset % 2, 0)
