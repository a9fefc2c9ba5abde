"""In-graph WordPiece (BERT, DistilBERT, MiniLM, ELECTRA, MobileBERT, MPNet, Funnel): texts -> HF's ids.

Uses the steps of the plain `tensorflow_text.BertTokenizer` (its ops ship in TF Serving): its BasicTokenizer's
split op for words and its WordpieceTokenizer. Its own `lower_case=True` applies NFKC case folding, which HF
does not ('…' -> '...'), so lower-casing and accent stripping are done here the way HF's BertNormalizer does
them; characters the two libraries' Unicode tables classify differently are rewritten first
(models/tokenizers/unicode_compat.py).
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_text.python.ops import regex_split_ops
from tensorflow_text.python.ops.bert_tokenizer import _DELIM_REGEX_PATTERN, _KEEP_DELIM_NO_WHITESPACE_PATTERN

from models.tokenizers import unicode_compat
from models.tokenizers.tokenizer_errors import TokenizerFilesDisagree, UnsupportedTokenizerError
from models.tokenizers.written_files import content_named_file

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class WordPieceSpec:
    """The settings of a model's HF WordPiece tokenizer that decide its ids."""

    vocab_path: str
    lower_case: bool
    strip_accents: bool
    unk_token: str
    max_input_chars_per_word: int = 100
    continuing_prefix: str = "##"
    placeholder: str = unicode_compat.PLACEHOLDER_CANDIDATES[0]


def read_spec(tokenizer_json: dict, model_dir: Path, unk_token: str) -> WordPieceSpec:
    """BertNormalizer's, WordPiece's settings and vocab from the tokenizer transformers built."""
    normalizer, pre_tokenizer = tokenizer_json.get("normalizer") or {}, tokenizer_json.get("pre_tokenizer") or {}
    if normalizer.get("type") != "BertNormalizer" or pre_tokenizer.get("type") != "BertPreTokenizer":
        raise UnsupportedTokenizerError(
            f"WordPiece with normalizer {normalizer.get('type')} and pre-tokenizer {pre_tokenizer.get('type')} "
            "(the in-graph WordPiece reproduces BertNormalizer + BertPreTokenizer)"
        )
    for option in ("clean_text", "handle_chinese_chars"):
        if not normalizer.get(option, True):
            raise UnsupportedTokenizerError(f"BertNormalizer {option}=false (the in-graph WordPiece always does it)")
    vocab = vocab_file(tokenizer_json["model"]["vocab"], model_dir)
    vocab_characters = set("".join(vocab.read_text(encoding="utf-8").splitlines()))  # read once, used twice
    differing = unicode_compat.vocab_characters_in_disagreement(vocab_characters)
    if differing:
        log.warning(
            "%d characters of %s's vocab are classified differently by tokenizers' and TensorFlow's Unicode "
            "tables; words holding them become [UNK] in-graph: %s",
            len(differing),
            model_dir,
            " ".join(f"U+{ord(c):04X}" for c in sorted(differing)[:10]),
        )
    lower_case = bool(normalizer.get("lowercase", False))
    strip_accents = normalizer.get("strip_accents")
    return WordPieceSpec(
        vocab_path=str(vocab),
        lower_case=lower_case,
        strip_accents=lower_case if strip_accents is None else bool(strip_accents),
        unk_token=unk_token,
        max_input_chars_per_word=tokenizer_json["model"].get("max_input_chars_per_word", 100),
        continuing_prefix=tokenizer_json["model"].get("continuing_subword_prefix", "##"),
        placeholder=unicode_compat.placeholder_for(vocab_characters),
    )


def vocab_file(vocab: dict[str, int], model_dir: Path) -> Path:
    """The vocab as the one-token-per-line file the in-graph lookup (and Transform's asset) reads: the folder's
    vocab.txt where it lists the same tokens in id order, else a copy written once under the temp folder, named by
    its content (transformers 5 saves WordPiece tokenizers as tokenizer.json alone)."""
    tokens = sorted(vocab, key=vocab.__getitem__)
    if [vocab[token] for token in tokens] != list(range(len(tokens))):
        raise UnsupportedTokenizerError("a WordPiece vocab whose ids are not 0..N-1")
    text = "\n".join(tokens) + "\n"
    beside = model_dir / "vocab.txt"
    if not beside.is_file():
        return content_named_file(text.encode("utf-8"), "hftfx-vocab-", ".txt")
    listed = beside.read_text(encoding="utf-8").removesuffix("\n").split("\n")  # lines as the lookup op reads them
    if listed != tokens:
        line = next((i for i, pair in enumerate(zip(listed, tokens, strict=False)) if pair[0] != pair[1]), len(tokens))
        raise TokenizerFilesDisagree(
            f"vocab.txt ({len(listed):,} tokens) differs from the vocab of tokenizer.json ({len(tokens):,}), which "
            f"transformers reads, from line {line + 1}: remove vocab.txt or save the folder again with save_pretrained"
        )
    return beside


def clean_and_fold(texts: tf.Tensor, lower_case: bool, strip_accents: bool) -> tf.Tensor:
    """HF BertNormalizer: clean text, lower-case and strip accents (without NFKC folding)."""
    # clean_text: tab/newline/CR are spaces; every other control, format or private-use character and
    # U+FFFD are dropped (a NUL would otherwise end the text early inside tensorflow_text).
    texts = tf.strings.regex_replace(texts, r"[\t\n\r]", " ")
    texts = tf.strings.regex_replace(texts, r"[\p{C}\x{FFFD}]", "")
    texts = tf.strings.regex_replace(texts, r"\p{Z}", " ")  # NBSP, em space, line separator ...
    if lower_case:
        # HF lower-cases char by char; ICU's string lowering turns a word-final capital sigma into 'ς'.
        texts = tf.strings.lower(tf.strings.regex_replace(texts, "Σ", "σ"), encoding="utf-8")  # noqa: RUF001
    if strip_accents:
        texts = tf_text.normalize_utf8(texts, "NFD")
        texts = tf.strings.regex_replace(texts, r"\p{Mn}", "")
    return texts


def normalize(texts: tf.Tensor, spec: WordPieceSpec) -> tf.Tensor:
    """HF's normalization, characters whose Unicode category the two libraries disagree on first made HF's."""
    texts = unicode_compat.rewrite_for_hf(texts, spec.placeholder, spec.strip_accents)
    return clean_and_fold(texts, spec.lower_case, spec.strip_accents)


def split_words(texts: tf.Tensor) -> tf.RaggedTensor:
    """HF's BertPreTokenizer: whitespace, punctuation and CJK ideographs end words ([N] -> [N, words]).

    tensorflow_text's BasicTokenizer split (its op and patterns; texts arrive with control characters already
    dropped by `normalize`), keeping only the words: BasicTokenizer also builds the offsets, each of the three
    as a validated ragged tensor, and those asserts were most of the graph each trace of preprocessing_fn built
    (and ran at serving). The op's row splits are valid by construction.
    """
    words, _, _, row_splits = regex_split_ops.gen_regex_split_ops.regex_split_with_offsets(
        tf.reshape(texts, [-1]), f"({_DELIM_REGEX_PATTERN})", f"({_KEEP_DELIM_NO_WHITESPACE_PATTERN})"
    )
    return tf.RaggedTensor.from_row_splits(words, row_splits, validate=False)


class WordPiece:
    """texts [N] -> HF ids [N, tokens] (ragged), special tokens not added. `vocab_path` may be a tensor (the
    Transform's asset) in place of the spec's path."""

    def __init__(self, spec: WordPieceSpec, vocab_path: str | tf.Tensor | None = None):
        self.spec = spec
        # HF limits words in characters, tensorflow_text in bytes: the byte bound admits every word HF
        # admits and __call__ applies HF's character bound.
        self._wordpiece = tf_text.WordpieceTokenizer(
            vocab_path if vocab_path is not None else spec.vocab_path,
            token_out_type=tf.int64,
            unknown_token=spec.unk_token,
            suffix_indicator=spec.continuing_prefix,
            max_bytes_per_word=4 * spec.max_input_chars_per_word,
        )

    def __call__(self, texts: tf.Tensor) -> tf.RaggedTensor:
        words = split_words(normalize(tf.reshape(texts, [-1]), self.spec))
        too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > self.spec.max_input_chars_per_word
        words = words.with_flat_values(tf.where(too_long, self.spec.unk_token, words.flat_values))
        pieces = self._wordpiece.tokenize(words)  # [N, words, pieces]
        # [N, pieces] as merge_dims(-2, -1) builds it (each text's words' pieces in a row), minus its validation
        # asserts: the composed splits are valid whenever both levels are.
        row_splits = tf.gather(pieces.values.row_splits, pieces.row_splits)
        return tf.RaggedTensor.from_row_splits(pieces.flat_values, row_splits, validate=False)
