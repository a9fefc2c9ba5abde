"""In-graph byte-level BPE (RoBERTa, DistilRoBERTa, GPT-2 style): texts -> the ids HF's fast tokenizer gives.

Read from the model's tokenizer.json (vocab, merges, ByteLevel's add_prefix_space) and written with TF core
ops plus tensorflow_text's RegexSplitWithOffsets, which TF Serving links. Hand-written because no library
offers it as TF ops that run inside a Transform: keras-hub's BytePairTokenizer keeps a mutable cache table
that TFT cannot trace, and tensorflow_text has no BPE op.

The steps are the `tokenizers` library's: the GPT-2 split regex (its `\\s+(?!\\S)` lookahead, which RE2 lacks,
done by cutting text at whitespace runs first), each byte mapped to GPT-2's printable stand-in, then merges
applied lowest rank first. Each distinct word of a batch is merged once.
"""

from __future__ import annotations

import dataclasses
import json

import tensorflow as tf
from tensorflow_text.python.ops.regex_split_ops import gen_regex_split_ops

from models.spm_tokenizer import WHITE_SPACE
from models.tokenizer_errors import UnsupportedTokenizerError
from models.unicode_compat import BYTE_LEVEL_DISAGREEMENTS, character_class

_WS = WHITE_SPACE  # what the tokenizers library's `\s` means
# GPT-2's pattern without its lookahead alternative (see _segments).
_GPT2_SPLIT = rf"'s|'t|'re|'ve|'m|'ll|'d| ?\p{{L}}+| ?\p{{N}}+| ?[^{_WS}\p{{L}}\p{{N}}]+|[{_WS}]+"
_NO_RANK = 2**62

# Characters `tokenizers`' regex engine sorts into another GPT-2 class than RE2 does (newer Unicode tables) are
# split as stand-ins RE2 sorts into HF's class, of the same UTF-8 length, and the words are then cut from the
# original text by their lengths. NUL too: tensorflow_text's split op ends a string there.
_STAND_INS = {
    "letter": ("a", "\u00e9", "\u4e00", "\U00010000"),
    "number": ("1", "\u0660", "\u0966", "\U0001d7ce"),
    "space": ("\t", "\x85", "\u2000", ""),
    "other": ("!", "\u00a7", "\u2600", "\U0001f600"),
}
_UTF8_LENGTHS = ((0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, 0x10FFFF))


def _compat_rewrites() -> tuple[tuple[str, str], ...]:
    """(RE2 character class, stand-in) pairs for BYTE_LEVEL_DISAGREEMENTS, by class and UTF-8 length."""
    rewrites = [(r"\x00", "\x01")]
    for name, runs in BYTE_LEVEL_DISAGREEMENTS.items():
        for (low, high), stand_in in zip(_UTF8_LENGTHS, _STAND_INS[name], strict=True):
            clipped = [(max(a, low), min(b, high)) for a, b in runs if a <= high and b >= low]
            if clipped:
                rewrites.append((character_class(clipped), stand_in))
    return tuple(rewrites)


_REWRITES = _compat_rewrites()
_NEEDS_REWRITE = "(?s).*(?:" + "|".join(pattern for pattern, _ in _REWRITES) + ").*"


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
    """What a byte-level BPE tokenizer.json declares: its vocab, merges and whether a space is prepended."""

    vocab: tuple[tuple[str, int], ...]
    merges: tuple[tuple[str, str], ...]
    add_prefix_space: bool
    unk_id: int
    # Words (raw text) that BPE turns into one token, and that token's id: looked up before any merging.
    whole_words: tuple[tuple[str, int], ...] = ()

    @classmethod
    def from_tokenizer_json(cls, tokenizer_json: dict, unk_id: int) -> ByteLevelBPESpec:
        _check_declared_steps(tokenizer_json)
        model = tokenizer_json["model"]
        merges = tuple(tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"])
        return cls(
            vocab=tuple(model["vocab"].items()),
            merges=merges,
            add_prefix_space=bool(_byte_level_step(tokenizer_json["pre_tokenizer"]).get("add_prefix_space")),
            unk_id=unk_id,
            whole_words=_whole_words(tokenizer_json),
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


def _check_declared_steps(tokenizer_json: dict) -> None:
    """Refuses what this graph does not reproduce: a normalizer, pre-tokenizer steps besides ByteLevel's regex
    split, subword prefixes or suffixes, dropout."""
    if tokenizer_json.get("normalizer"):
        raise UnsupportedTokenizerError(f"normalizer {tokenizer_json['normalizer'].get('type')} before ByteLevel")
    pre = tokenizer_json["pre_tokenizer"]
    steps = pre.get("pretokenizers", [pre])
    if [step["type"] for step in steps] != ["ByteLevel"] or not steps[0].get("use_regex", True):
        raise UnsupportedTokenizerError(f"pre-tokenizer {[step['type'] for step in steps]} without GPT-2's split")
    model = tokenizer_json["model"]
    for option in ("continuing_subword_prefix", "end_of_word_suffix", "dropout"):
        if model.get(option):
            raise UnsupportedTokenizerError(f"BPE option {option}={model[option]!r}")


def _byte_level_step(pre_tokenizer: dict) -> dict:
    steps = pre_tokenizer.get("pretokenizers", [pre_tokenizer])
    return next(step for step in steps if step["type"] == "ByteLevel")


def _split_regex(strings: tf.Tensor, pattern: str) -> tf.RaggedTensor:
    """strings [N] -> the matches of `pattern` and the text between them, as a ragged [N, pieces]."""
    pieces, _, _, row_splits = gen_regex_split_ops.regex_split_with_offsets(strings, f"({pattern})", f"({pattern})")
    return tf.RaggedTensor.from_row_splits(pieces, row_splits, validate=False)


def _segments(texts: tf.Tensor) -> tf.RaggedTensor:
    """texts [N] -> [N, segments], each a stretch the GPT-2 regex splits on its own.

    GPT-2's `\\s+(?!\\S)|\\s+` leaves a whitespace run's last character to start the word after it. Cutting the
    text into whitespace runs and the rest, then moving each run's last character onto the following word,
    gives stretches in which that lookahead never decides anything, so RE2 (no lookahead) splits them alike.
    """
    runs = _split_regex(texts, f"[{_WS}]+")
    flat, row_ids = runs.flat_values, runs.value_rowids()
    # Runs alternate between whitespace and the rest, so a run is whitespace when its place in the text and
    # whether the text starts with whitespace say so (one regex per text rather than one per run).
    starts_with_space = tf.strings.regex_full_match(texts, f"(?s)[{_WS}].*")
    place = tf.range(tf.size(flat, out_type=tf.int64)) - tf.gather(runs.row_splits, row_ids)
    is_space = tf.equal(place % 2, 1 - tf.cast(tf.gather(starts_with_space, row_ids), tf.int64))
    same_text = tf.concat([tf.equal(row_ids[1:], row_ids[:-1]), [False]], axis=0)
    gives_last = is_space & same_text  # a run followed by a word in the same text: its last char goes on
    chars = tf.strings.length(flat, unit="UTF8_CHAR")
    head = tf.strings.substr(flat, tf.zeros_like(chars), chars - 1, unit="UTF8_CHAR")
    last = tf.strings.substr(flat, chars - 1, tf.ones_like(chars), unit="UTF8_CHAR")
    received = tf.concat([[""], tf.where(gives_last, last, "")[:-1]], axis=0)
    stretches = tf.where(gives_last, head, received + flat)
    return tf.ragged.boolean_mask(runs.with_flat_values(stretches), runs.with_flat_values(stretches != ""))


def pre_tokenize(texts: tf.Tensor, add_prefix_space: bool) -> tf.RaggedTensor:
    """texts [N] -> the words ByteLevel's pre-tokenizer makes, [N, words] (raw UTF-8, before byte mapping)."""
    if add_prefix_space:
        texts = tf.where(tf.strings.regex_full_match(texts, "(?s) .*"), texts, " " + texts)
    rewritten = tf.strings.regex_full_match(texts, _NEEDS_REWRITE)
    any_rewritten = tf.reduce_any(rewritten)
    safe = tf.cond(any_rewritten, lambda: tf.where(rewritten, _rewrite(texts), texts), lambda: texts)
    # The lookahead decides only where two or more whitespace characters precede a word (3% of the corpus's
    # reviews): only those texts are cut into stretches, the rest go to the split whole.
    needs_cut = tf.strings.regex_full_match(safe, f"(?s).*[{_WS}][{_WS}][^{_WS}].*")
    cut_rows, whole_rows = tf.where(needs_cut)[:, 0], tf.where(~needs_cut)[:, 0]
    whole = tf.RaggedTensor.from_row_lengths(tf.gather(safe, whole_rows), tf.ones_like(whole_rows))
    segments = tf.gather(
        tf.concat([_segments(tf.gather(safe, cut_rows)), whole], axis=0),
        tf.math.invert_permutation(tf.concat([cut_rows, whole_rows], axis=0)),
    )
    words = _split_regex(segments.flat_values, _GPT2_SPLIT)
    words = tf.RaggedTensor.from_row_splits(
        words.flat_values, tf.gather(words.row_splits, segments.row_splits), validate=False
    )
    return tf.cond(any_rewritten, lambda: _cut_from(texts, words), lambda: words)


def _rewrite(texts: tf.Tensor) -> tf.Tensor:
    for pattern, stand_in in _REWRITES:
        texts = tf.strings.regex_replace(texts, pattern, stand_in)
    return texts


def split_word_counts(texts: list[str]) -> list[int]:
    """How many words RE2's GPT-2 split (no rewrites) makes of each text: unicode_compat derives its
    byte-level table from it."""
    counts: list[int] = []
    for start in range(0, len(texts), 65536):
        counts += _split_regex(tf.constant(texts[start : start + 65536]), _GPT2_SPLIT).row_lengths().numpy().tolist()
    return counts


def _cut_from(texts: tf.Tensor, words: tf.RaggedTensor) -> tf.RaggedTensor:
    """The same words taken from `texts` by their byte lengths (the words of a text concatenate to it)."""
    lengths = tf.strings.length(words.flat_values)
    ends = tf.cumsum(lengths)
    text_starts = tf.gather(tf.concat([[0], ends], axis=0), tf.gather(words.row_splits, words.value_rowids()))
    starts = ends - lengths - text_starts
    return words.with_flat_values(tf.strings.substr(tf.gather(texts, words.value_rowids()), starts, lengths))


class ByteLevelBPE:
    """texts [N] -> HF ids [N, tokens] (ragged), special tokens not added.

    Merges work on token ids: every symbol a merge makes is in the vocab, so a pair is the int64 key
    left * vocab_size + right, looked up for its rank and the id it merges into (no string work per round).
    """

    def __init__(self, spec: ByteLevelBPESpec):
        self.spec = spec
        vocab = dict(spec.vocab)
        self._size = max(vocab.values()) + 1
        stand_ins = bytes_to_unicode()
        self._byte_ids = tf.constant([vocab.get(c, spec.unk_id) for c in stand_ins], tf.int64)
        merges = [(a, b) for a, b in spec.merges if a in vocab and b in vocab and a + b in vocab]
        keys = tf.constant([vocab[a] * self._size + vocab[b] for a, b in merges], tf.int64)
        self._ranks = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(keys, tf.range(len(merges), dtype=tf.int64)), _NO_RANK
        )
        self._merged = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(keys, tf.constant([vocab[a + b] for a, b in merges], tf.int64)),
            spec.unk_id,
        )
        words, ids = zip(*spec.whole_words, strict=True) if spec.whole_words else ((), ())
        self._whole_words = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(words, tf.string), tf.constant(ids, tf.int64), tf.string, tf.int64
            ),
            -1,
        )

    def __call__(self, texts: tf.Tensor) -> tf.RaggedTensor:
        words = pre_tokenize(tf.reshape(texts, [-1]), self.spec.add_prefix_space)
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
