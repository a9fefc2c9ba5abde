"""BPE's merge loop on token ids, shared by every BPE family (byte-level, byte fallback).

Hand-written because no library offers BPE as TF ops that run inside a Transform: keras-hub's BytePairTokenizer
keeps a mutable cache table that TFT cannot trace, and tensorflow_text has no BPE op. A family turns texts into
words and each word into its first symbols (bytes, characters); `encode_words` does the rest as `tokenizers`'
BPE model does: each distinct word of a batch merged once, a word that is a whole vocab entry looked up, the
rest merged lowest rank first until no pair merges.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

import tensorflow as tf

from models.tokenizers import ragged_rows

_NO_RANK = 2**62

# Merge rounds run until no pair of a word merges: one round per merge a word needs, so a word of n bytes costs up
# to n rounds over the batch (about 10 s for 20,000 letters of spaceless English: make bench-inputs). A word longer
# than this is merged in pieces of this many bytes, side by side: the ids are transformers' own for every word up
# to it (real words, URLs and numbers are split far shorter by the families' pre-tokenizers), and rounds stay bounded.
MAX_WORD_BYTES = 256


@dataclasses.dataclass(frozen=True)
class MergeSpec:
    """A BPE model's merges as the graph's tables want them, worked out once per model (the Transform builds the
    graph about nine times): int64 pair keys (left id * vocab_size + right id) with the id each makes, in rank
    order, and the words BPE gives back as one vocab entry (raw text), looked up before any merging."""

    vocab_size: int
    merge_keys: tuple[int, ...]
    merged_ids: tuple[int, ...]
    unk_id: int
    whole_words: tuple[str, ...] = ()
    whole_word_ids: tuple[int, ...] = ()

    @classmethod
    def of_model(cls, model: dict, unk_id: int, whole: tuple[tuple[str, int], ...]) -> MergeSpec:
        """From tokenizer.json's BPE model section; merges whose parts or result are not in the vocab never apply."""
        vocab: dict[str, int] = model["vocab"]
        size = max(vocab.values()) + 1
        merges = [m.split(" ", 1) if isinstance(m, str) else m for m in model["merges"]]
        merges = [(a, b) for a, b in merges if a in vocab and b in vocab and a + b in vocab]
        return cls(
            vocab_size=size,
            merge_keys=tuple(vocab[a] * size + vocab[b] for a, b in merges),
            merged_ids=tuple(vocab[a + b] for a, b in merges),
            unk_id=unk_id,
            whole_words=tuple(text for text, _ in whole),
            whole_word_ids=tuple(token_id for _, token_id in whole),
        )


def whole_words(tokenizer_json: dict, raw_text: Callable[[str], str | None]) -> tuple[tuple[str, int], ...]:
    """Vocab entries that the model's own BPE (run by `tokenizers`) gives back as themselves, as the raw text of a
    word (`raw_text` of the entry; None: no word is it).

    Most words of a text are such entries ("Ġthe", "▁movie"): a hash lookup gives their id, and only the rest go
    through the merge rounds. Asking `tokenizers` for each entry keeps this exact: an entry the merges would not
    rebuild is left to them (with `ignore_merges`, Llama-3's, every entry is its own word).
    """
    from tokenizers import Tokenizer

    bare = {"normalizer": None, "pre_tokenizer": None, "post_processor": None, "decoder": None, "added_tokens": []}
    backend = Tokenizer.from_str(json.dumps({**tokenizer_json, **bare}))
    found = []
    for token, token_id in tokenizer_json["model"]["vocab"].items():
        text = raw_text(token)
        if text is not None and [t.id for t in backend.model.tokenize(token)] == [token_id]:
            found.append((text, token_id))
    return tuple(found)


def string_table(keys: tuple[str, ...], values: tuple[int, ...], default: int) -> tf.lookup.StaticHashTable:
    return tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant(keys, tf.string), tf.constant(values, tf.int64), tf.string, tf.int64
        ),
        default,
    )


class Merges:
    """words [texts, (words)] (raw UTF-8) -> HF ids [texts, (tokens)], given how a word's first symbols are made.

    Merges work on token ids: every symbol a merge makes is in the vocab, so a pair is an int64 key looked up
    for its rank and the id it merges into (no string work per round).
    """

    def __init__(self, spec: MergeSpec, first_symbols: Callable[[tf.Tensor], tf.RaggedTensor]):
        """`first_symbols`: words [W] -> the ids BPE starts each from, [W, (symbols)]."""
        self.spec = spec
        self._first_symbols = first_symbols
        keys = tf.constant(spec.merge_keys, tf.int64)
        self._ranks = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(keys, tf.range(len(spec.merge_keys), dtype=tf.int64)), _NO_RANK
        )
        self._merged = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(keys, tf.constant(spec.merged_ids, tf.int64)), spec.unk_id
        )
        self._whole_words = string_table(spec.whole_words, spec.whole_word_ids, -1)

    def __call__(self, words: tf.RaggedTensor) -> tf.RaggedTensor:
        distinct, where = tf.unique(words.flat_values)
        whole = self._whole_words.lookup(distinct)
        hit_rows, miss_rows = tf.where(whole >= 0)[:, 0], tf.where(whole < 0)[:, 0]
        hits = tf.RaggedTensor.from_row_lengths(tf.gather(whole, hit_rows), tf.ones_like(hit_rows))
        merged = self._merge(self._first_symbols(tf.gather(distinct, miss_rows)))
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
        size = self.spec.vocab_size

        def round_(ids, row_ids, _):
            keys = ids[:-1] * size + ids[1:]
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
            (symbols.flat_values, ragged_rows.row_ids(symbols), tf.size(symbols.flat_values) > 1),
            shape_invariants=(tf.TensorShape([None]), tf.TensorShape([None]), tf.TensorShape([])),
        )
        return tf.RaggedTensor.from_value_rowids(ids, row_ids, nrows=words, validate=False)


def pieces_of_long_words(words: tf.RaggedTensor, limit: int = MAX_WORD_BYTES, unit: str = "BYTE") -> tf.RaggedTensor:
    """[texts, words] -> [texts, pieces]: each word as it is, or cut into pieces of `limit` bytes (or characters,
    unit "UTF8_CHAR", for a family whose symbols are characters)."""
    lengths = tf.strings.length(words.flat_values, unit=unit)
    counts = tf.maximum(1, (lengths + limit - 1) // limit)
    owner = ragged_rows.repeat_range(counts)
    starts = (tf.range(tf.reduce_sum(counts)) - tf.gather(tf.cumsum(counts, exclusive=True), owner)) * limit
    pieces = tf.strings.substr(tf.gather(words.flat_values, owner), starts, tf.fill(tf.shape(starts), limit), unit=unit)
    row_counts = tf.math.unsorted_segment_sum(tf.cast(counts, tf.int64), ragged_rows.row_ids(words), words.nrows())
    return tf.RaggedTensor.from_row_lengths(pieces, row_counts, validate=False)


def bytes_of(strings: tf.Tensor) -> tf.RaggedTensor:
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
