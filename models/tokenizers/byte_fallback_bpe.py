"""In-graph BPE with byte fallback (Gemma, mmBERT, Llama-2, Mistral style): texts -> the ids HF's fast tokenizer gives.

These tokenizer.json files come from SentencePiece BPE models: spaces become U+2581 (a Replace normalizer, with a
Prepend of it for Llama-2, or a Metaspace pre-tokenizer), BPE starts a word from its characters, and a character
outside the vocab falls back to its UTF-8 bytes as `<0xXX>` tokens. The merges (bpe_merges.py) are the
tokenizer.json's own, so no .model file is needed.

Gemma's declares no split: BPE runs over the whole text. The graph splits it before every U+2581 that follows
another character, which changes nothing when no vocab entry holds U+2581 after another character (checked when
the spec is read; SentencePiece's whitespace split guarantees it), and keeps the merge rounds per word.
"""

from __future__ import annotations

import dataclasses
import itertools

import tensorflow as tf
import tensorflow_text

from models.tokenizers import bpe_merges
from models.tokenizers.code_points import CodePoints, cut_words
from models.tokenizers.ragged_rows import row_ids
from models.tokenizers.tokenizer_errors import UnsupportedTokenizerError

METASPACE = "\u2581"
_REPLACE_SPACES = {"type": "Replace", "pattern": {"String": " "}, "content": METASPACE}
_PREPEND = {"type": "Prepend", "prepend": METASPACE}
NEVER, ALWAYS, UNLESS_PRESENT = "never", "always", "unless present"
_FORMS = ("NFC", "NFKC")  # Unicode normalizations tensorflow_text runs as `tokenizers` does
# A word of more characters is merged in pieces of this many (as bpe_merges.MAX_WORD_BYTES bounds byte-level BPE's
# rounds): a text without spaces (Chinese, Japanese) is one word here.
MAX_WORD_CHARACTERS = bpe_merges.MAX_WORD_BYTES


@dataclasses.dataclass(frozen=True)
class ByteFallbackBPESpec:
    """The merges, each one-character entry's id, the 256 `<0xXX>` ids, and the steps before BPE."""

    merges: bpe_merges.MergeSpec
    characters: tuple[str, ...]
    character_ids: tuple[int, ...]
    byte_ids: tuple[int, ...] | None  # None: no byte fallback, a character outside the vocab is one unk
    prepend: str  # U+2581 put before the text: NEVER, ALWAYS (Llama-2's Prepend), UNLESS_PRESENT (Metaspace's)
    split_each_metaspace: bool  # Metaspace's split: every U+2581 starts a word; else only one after another character
    fuse_unk: bool
    unicode_form: str | None = None  # NFC or NFKC before the rest

    @classmethod
    def from_tokenizer_json(cls, tokenizer_json: dict, unk_id: int) -> ByteFallbackBPESpec:
        form, prepend, split_each = _checked_steps(tokenizer_json)
        model = tokenizer_json["model"]
        vocab: dict[str, int] = model["vocab"]
        if not split_each:
            _check_no_metaspace_inside(vocab, tokenizer_json)
        single = sorted((token, token_id) for token, token_id in vocab.items() if len(token) == 1)
        byte_tokens = [vocab.get(f"<0x{byte:02X}>") for byte in range(256)]
        fallback = model.get("byte_fallback") and None not in byte_tokens
        return cls(
            merges=bpe_merges.MergeSpec.of_model(model, unk_id, bpe_merges.whole_words(tokenizer_json, lambda t: t)),
            characters=tuple(token for token, _ in single),
            character_ids=tuple(token_id for _, token_id in single),
            byte_ids=tuple(byte_tokens) if fallback else None,
            prepend=prepend,
            split_each_metaspace=split_each,
            fuse_unk=bool(model.get("fuse_unk")),
            unicode_form=form,
        )


def _checked_steps(tokenizer_json: dict) -> tuple[str | None, str, bool]:
    """(Unicode form, prepend, split at every U+2581) after refusing steps this graph does not reproduce."""
    normalizer, pre = tokenizer_json.get("normalizer"), tokenizer_json.get("pre_tokenizer")
    steps = (normalizer or {}).get("normalizers", [normalizer] if normalizer else [])
    form = steps[0]["type"] if steps and steps[0].get("type") in _FORMS else None
    steps = steps[1:] if form else steps
    model = tokenizer_json["model"]
    for option in ("continuing_subword_prefix", "end_of_word_suffix", "dropout"):
        if model.get(option):
            raise UnsupportedTokenizerError(f"BPE option {option}={model[option]!r}")
    if steps in ([_REPLACE_SPACES], [_PREPEND, _REPLACE_SPACES]) and _splits_nothing(pre):
        return form, ALWAYS if steps[0] == _PREPEND else NEVER, False
    if not steps and (pre or {}).get("type") == "Metaspace" and pre.get("replacement") == METASPACE:
        prepend = NEVER if pre.get("prepend_scheme", "always") == "never" else UNLESS_PRESENT
        return form, prepend, bool(pre.get("split", True))
    declared = ([form] if form else []) + [step.get("type") for step in steps]
    raise UnsupportedTokenizerError(
        f"normalizer {declared} and pre-tokenizer {(pre or {}).get('type')}: byte-fallback BPE is read with spaces "
        "replaced by U+2581 (Gemma's Replace, Llama-2's Prepend and Replace) and no split, or with a Metaspace "
        "pre-tokenizer, either after NFC or NFKC"
    )


def _splits_nothing(pre: dict | None) -> bool:
    """No pre-tokenizer, or transformers 5's Split on " " after every space became U+2581 (it finds none)."""
    return pre is None or (pre.get("type") == "Split" and pre.get("pattern") == {"String": " "})


def _check_no_metaspace_inside(vocab: dict[str, int], tokenizer_json: dict) -> None:
    added = {token["content"] for token in tokenizer_json.get("added_tokens", [])}
    crossing = [t for t in vocab if t not in added and any(a != METASPACE == b for a, b in itertools.pairwise(t))]
    if crossing:
        raise UnsupportedTokenizerError(
            f"vocab entries with U+2581 after another character ({crossing[:3]}), which this graph's split before "
            "each word would not reproduce"
        )


class ByteFallbackBPE:
    """texts [N] -> HF ids [N, tokens] (ragged), special tokens not added."""

    def __init__(self, spec: ByteFallbackBPESpec):
        self.spec = spec
        self._characters = bpe_merges.string_table(spec.characters, spec.character_ids, -1)
        self._byte_ids = None if spec.byte_ids is None else tf.constant(spec.byte_ids, tf.int64)
        self._merges = bpe_merges.Merges(spec.merges, self._first_symbols)

    def __call__(self, texts: tf.Tensor) -> tf.RaggedTensor:
        texts = tf.reshape(texts, [-1])
        if self.spec.unicode_form:
            texts = tensorflow_text.normalize_utf8(texts, self.spec.unicode_form)
        texts = tf.strings.regex_replace(texts, " ", METASPACE)
        if self.spec.prepend != NEVER:
            present = tf.strings.regex_full_match(texts, f"(?s){METASPACE}.*") & (self.spec.prepend == UNLESS_PRESENT)
            texts = tf.where(tf.logical_not(present) & (tf.strings.length(texts) > 0), METASPACE + texts, texts)
        chars = CodePoints.of(texts)
        metaspace = tf.equal(chars.point, ord(METASPACE))
        if not self.spec.split_each_metaspace:
            metaspace &= tf.logical_not(chars.before(metaspace, True))
        words = cut_words(texts, chars, chars.first | metaspace)
        return self._merges(bpe_merges.pieces_of_long_words(words, MAX_WORD_CHARACTERS, "UTF8_CHAR"))

    def _first_symbols(self, words: tf.Tensor) -> tf.RaggedTensor:
        """Each character's own id, or its bytes' `<0xXX>` ids where the vocab has no entry for it."""
        characters = tf.strings.unicode_split(words, "UTF-8")
        ids = self._characters.lookup(characters.flat_values)
        if self._byte_ids is None:
            symbols = characters.with_flat_values(tf.where(ids >= 0, ids, self.spec.merges.unk_id))
            return _fused(symbols, self.spec.merges.unk_id) if self.spec.fuse_unk else symbols
        known, unknown = tf.where(ids >= 0)[:, 0], tf.where(ids < 0)[:, 0]
        own = tf.RaggedTensor.from_row_lengths(tf.gather(ids, known), tf.ones_like(known))
        byte_values = bpe_merges.bytes_of(tf.gather(characters.flat_values, unknown))
        fallback = byte_values.with_flat_values(tf.gather(self._byte_ids, byte_values.flat_values))
        order = tf.math.invert_permutation(tf.concat([known, unknown], axis=0))
        per_character = tf.gather(tf.concat([own, fallback.with_row_splits_dtype(tf.int64)], axis=0), order)
        symbols = tf.RaggedTensor.from_row_splits(
            per_character.flat_values, tf.gather(per_character.row_splits, characters.row_splits), validate=False
        )
        if self.spec.fuse_unk:
            symbols = _fused(symbols, self.spec.merges.unk_id)
        return symbols


def _fused(symbols: tf.RaggedTensor, unk_id: int) -> tf.RaggedTensor:
    """Consecutive unknown symbols of a word as one, as `tokenizers`' fuse_unk does."""
    values, rows = symbols.flat_values, row_ids(symbols)
    unknown = tf.equal(values, unk_id)
    repeat = unknown & tf.concat([[False], unknown[:-1] & tf.equal(rows[1:], rows[:-1])], axis=0)
    keep = tf.logical_not(repeat)
    return tf.RaggedTensor.from_value_rowids(
        tf.boolean_mask(values, keep), tf.boolean_mask(rows, keep), nrows=symbols.nrows(), validate=False
    )
