"""In-graph byte-level BPE (RoBERTa, ModernBERT: GPT-2's split; EuroBERT, Llama-3: the GPT-4 split; Qwen2 and the
BPEs that split digits: the GPT-4 split with each digit alone): texts -> the ids HF's fast tokenizer gives.

Read from the model's tokenizer.json (vocab, merges, its split, ByteLevel's add_prefix_space) and written with TF
core ops only. The steps are the `tokenizers` library's: the split (GPT-2's regex, pre_tokenize below, or the
GPT-4 / Llama-3 one, cl100k_split.py, as rules on code points classed by `tokenizers`' own Unicode tables), each
byte mapped to GPT-2's printable stand-in, then BPE's merges (bpe_merges.py).
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf
import tensorflow_text

from models.tokenizers import bpe_merges, cl100k_split, gpt2_classes
from models.tokenizers.code_points import CodePoints, any_equal, any_pair_equal, cut_words, shifted
from models.tokenizers.tokenizer_errors import UnsupportedTokenizerError

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


# the splits before ByteLevel this graph runs; the GPT-4 / Llama-3 ones by their Split pattern (cl100k_split.py)
GPT2, CL100K, CL100K_DIGITS = "GPT-2", "GPT-4 / Llama-3", "GPT-4 / Llama-3, digits one by one"
CL100K_PATTERNS = {CL100K: cl100k_split.PATTERN, CL100K_DIGITS: cl100k_split.DIGITS_PATTERN}


@dataclasses.dataclass(frozen=True)
class ByteLevelBPESpec:
    """A byte-level BPE tokenizer.json as the graph wants it: its merges, the id of each byte's GPT-2 stand-in,
    and its steps before BPE (the split, ByteLevel's add_prefix_space, NFC)."""

    merges: bpe_merges.MergeSpec
    byte_ids: tuple[int, ...]
    add_prefix_space: bool
    nfc: bool = False  # texts NFC-normalized first (ModernBERT's tokenizer.json declares it)
    split: str = GPT2

    @classmethod
    def from_tokenizer_json(cls, tokenizer_json: dict, unk_id: int) -> ByteLevelBPESpec:
        split, byte_level = _checked_steps(tokenizer_json)
        model = tokenizer_json["model"]
        return cls(
            merges=bpe_merges.MergeSpec.of_model(model, unk_id, _whole_words(tokenizer_json)),
            byte_ids=tuple(model["vocab"].get(c, unk_id) for c in bytes_to_unicode()),
            add_prefix_space=bool(byte_level.get("add_prefix_space")),
            nfc=(tokenizer_json.get("normalizer") or {}).get("type") == "NFC",
            split=split,
        )


def _whole_words(tokenizer_json: dict) -> tuple[tuple[str, int], ...]:
    raw_byte = {stand_in: byte for byte, stand_in in enumerate(bytes_to_unicode())}

    def raw_text(token: str) -> str | None:  # the text whose bytes' stand-ins the entry is
        if not all(c in raw_byte for c in token):
            return None
        try:
            return bytes(raw_byte[c] for c in token).decode("utf-8")
        except UnicodeDecodeError:
            return None

    return bpe_merges.whole_words(tokenizer_json, raw_text)


def _checked_steps(tokenizer_json: dict) -> tuple[str, dict]:
    """The split before ByteLevel and the ByteLevel step, after refusing what this graph does not reproduce: a
    normalizer other than NFC, steps besides GPT-2's split (ByteLevel's regex) or the GPT-4 / Llama-3 split (a
    Split step on cl100k_split's PATTERN or DIGITS_PATTERN, then ByteLevel without its regex), subword prefixes or
    suffixes, dropout."""
    if (tokenizer_json.get("normalizer") or {}).get("type", "NFC") != "NFC":
        raise UnsupportedTokenizerError(f"normalizer {tokenizer_json['normalizer'].get('type')} before ByteLevel")
    pre = tokenizer_json["pre_tokenizer"]
    steps = pre.get("pretokenizers", [pre])
    names = [step["type"] for step in steps]
    if names == ["ByteLevel"] and steps[0].get("use_regex", True):
        split, byte_level = GPT2, steps[0]
    elif names == ["Split", "ByteLevel"] and _cl100k_split(steps[0]) and not _regex_or_prefix(steps[1]):
        split, byte_level = _cl100k_split(steps[0]), steps[1]
    else:
        raise UnsupportedTokenizerError(
            f"pre-tokenizer {names} without GPT-2's split or the GPT-4 / Llama-3 one (Split on its pattern, numbers "
            "in threes or digits one by one, then ByteLevel without a regex)"
        )
    model = tokenizer_json["model"]
    for option in ("continuing_subword_prefix", "end_of_word_suffix", "dropout"):
        if model.get(option):
            raise UnsupportedTokenizerError(f"BPE option {option}={model[option]!r}")
    return split, byte_level


def _regex_or_prefix(byte_level: dict) -> bool:
    """ByteLevel after a Split: its own regex or a prefix space (added to every piece) is not Llama-3's."""
    return byte_level.get("use_regex", True) or bool(byte_level.get("add_prefix_space"))


def _cl100k_split(step: dict) -> str | None:
    """Which GPT-4 / Llama-3 split a Split step is (CL100K_PATTERNS), or None."""
    if step.get("behavior") != "Isolated" or step.get("invert"):
        return None
    pattern = (step.get("pattern") or {}).get("Regex")
    return next((name for name, known in CL100K_PATTERNS.items() if known == pattern), None)


def pre_tokenize(texts: tf.Tensor, add_prefix_space: bool) -> tf.RaggedTensor:
    """texts [N] -> the words ByteLevel's pre-tokenizer makes, [N, words] (raw UTF-8, before byte mapping).

    GPT-2's regex applied as arithmetic on code points: each character's class (letter, number, whitespace,
    other) from `tokenizers`' own Unicode tables (models/tokenizers/gpt2_classes.py), then where the pattern starts a
    word. Hand-written because RE2, the only regex engine in TensorFlow, has older Unicode tables and no
    lookahead (`\\s+(?!\\S)`), and its capturing split was most of the tokenizer's time.
    """
    if add_prefix_space:
        texts = tf.where(tf.strings.regex_full_match(texts, "(?s) .*"), texts, " " + texts)
    chars = CodePoints.of(texts)
    point, kind, first, last = chars.point, chars.kind, chars.first, chars.last
    before = chars.before(kind, -1)  # the previous character's class in the same text
    before_point = chars.before(point, -1)
    after = chars.after(kind, -1)
    space = tf.equal(kind, gpt2_classes.SPACE)
    # A whitespace run's last character before a word: `\\s+(?!\\S)` leaves it out of the run, so it starts a
    # word of its own, or, when it is " ", the word after it (` ?\\p{L}+` and its siblings take it).
    last_before_word = space & tf.logical_not(last) & tf.not_equal(after, gpt2_classes.SPACE)
    joined = shifted(last_before_word & tf.equal(point, _SPACE), 1, False)
    # A contraction ('s 't 're 've 'm 'll 'd) is matched where a word starts at the apostrophe: at the text's
    # start, after a letter or number, or after whitespace that stays a word of its own.
    next1, next2 = shifted(point, -1, -1), shifted(point, -2, -1)
    row_has_1 = tf.logical_not(last)
    row_has_2 = row_has_1 & tf.logical_not(shifted(last, -1, True))
    word_starts_here = (
        first
        | tf.equal(before, gpt2_classes.LETTER)
        | tf.equal(before, gpt2_classes.NUMBER)
        | (tf.equal(before, gpt2_classes.SPACE) & tf.not_equal(before_point, _SPACE))
    )
    apostrophe = tf.equal(point, _APOSTROPHE) & word_starts_here
    short = apostrophe & row_has_1 & any_equal(next1, _CONTRACTIONS_1)  # 's 't 'm 'd
    long = apostrophe & row_has_2 & any_pair_equal(next1, next2, _CONTRACTIONS_2)  # 're 've 'll
    inside = shifted(short | long, 1, False) | shifted(long, 2, False)
    after_contraction = shifted(short, 2, False) | shifted(long, 3, False)
    new_class = tf.not_equal(before, kind)
    starts_word = tf.where(
        space,
        first | new_class | last_before_word,
        (first | new_class) & tf.logical_not(joined) & tf.logical_not(inside),
    )
    return cut_words(texts, chars, starts_word | short | long | after_contraction)


class ByteLevelBPE:
    """texts [N] -> HF ids [N, tokens] (ragged), special tokens not added."""

    def __init__(self, spec: ByteLevelBPESpec, max_word_bytes: int = bpe_merges.MAX_WORD_BYTES):
        self.spec = spec
        self.max_word_bytes = max_word_bytes  # benchmarks/bounded_inputs.py measures a word merged whole too
        self._byte_ids = tf.constant(spec.byte_ids, tf.int64)
        self._merges = bpe_merges.Merges(spec.merges, self._byte_symbols)

    def _byte_symbols(self, words: tf.Tensor) -> tf.RaggedTensor:
        """BPE starts a word from its bytes' GPT-2 stand-ins."""
        byte_values = bpe_merges.bytes_of(words)
        return byte_values.with_flat_values(tf.gather(self._byte_ids, byte_values.flat_values))

    def __call__(self, texts: tf.Tensor) -> tf.RaggedTensor:
        texts = tf.reshape(texts, [-1])
        if self.spec.nfc:
            texts = tensorflow_text.normalize_utf8(texts, "NFC")
        if self.spec.split in CL100K_PATTERNS:
            words = cl100k_split.split(texts, cl100k_split.NUMBER_RUNS[CL100K_PATTERNS[self.spec.split]])
        else:
            words = pre_tokenize(texts, self.spec.add_prefix_space)
        return self._merges(bpe_merges.pieces_of_long_words(words, self.max_word_bytes))
