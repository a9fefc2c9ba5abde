"""In-graph WordPiece tokenization that reproduces Hugging Face's BertTokenizerFast id for id.

Built once from a model directory's vocab and tokenizer settings, used by Transform's preprocessing_fn and
therefore inside the exported serving graph. Uses the steps of the plain `tensorflow_text.BertTokenizer`
(its ops ship in TF Serving; FastBertTokenizer's do not): its BasicTokenizer's split op for words and its
WordpieceTokenizer. Its own `lower_case=True` applies NFKC case folding, which HF does not ('…' -> '...'),
so lower-casing and accent stripping are done here the way HF does them; characters the two libraries'
Unicode tables classify differently are rewritten first (models/unicode_compat.py).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from pathlib import Path

import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_text.python.ops import regex_split_ops
from tensorflow_text.python.ops.bert_tokenizer import _DELIM_REGEX_PATTERN, _KEEP_DELIM_NO_WHITESPACE_PATTERN

from models import unicode_compat
from models.contract import ATTENTION_MASK, INPUT_IDS, TOKEN_COUNT, TOKEN_TYPE_IDS, TRUNCATED
from models.pretrained import ModelFilesError
from pipeline.errors import UserError

log = logging.getLogger(__name__)


class UnsupportedTokenizerError(UserError, ValueError):
    """The model's tokenizer is not WordPiece; the message names what is supported."""


@dataclasses.dataclass(frozen=True)
class TokenizerSpec:
    """The settings of a model's HF tokenizer that decide its ids."""

    vocab_path: str
    vocab_size: int
    lower_case: bool
    strip_accents: bool
    cls_id: int
    sep_id: int
    pad_id: int
    unk_token: str
    unk_id: int
    model_input_names: tuple[str, ...]
    max_input_chars_per_word: int = 100
    placeholder: str = unicode_compat.PLACEHOLDER_CANDIDATES[0]

    @property
    def takes_token_type_ids(self) -> bool:
        return TOKEN_TYPE_IDS in self.model_input_names


def tokenizer_spec(model_dir: str | Path) -> TokenizerSpec:
    """Reads the tokenizer settings through transformers itself, so they mean what HF means by them.

    Remembered per folder while its files are unchanged: Transform traces preprocessing_fn nine times a run,
    and each read loads the HF tokenizer (about 0.1 s).
    """
    model_dir = Path(model_dir).resolve()
    return _read_tokenizer_spec(model_dir, _files_stamp(model_dir))


def _files_stamp(directory: Path) -> tuple[tuple[str, int, int], ...]:
    """Name, modification time and size of each file in `directory` (empty if it is missing)."""
    if not directory.is_dir():
        return ()
    stats = ((path.name, path.stat()) for path in sorted(directory.iterdir()))
    return tuple((name, stat.st_mtime_ns, stat.st_size) for name, stat in stats)


@functools.lru_cache(maxsize=8)
def _read_tokenizer_spec(model_dir: Path, files_stamp: tuple) -> TokenizerSpec:
    from tokenizers import models as tokenizer_models
    from transformers import AutoTokenizer

    try:
        hf = AutoTokenizer.from_pretrained(model_dir, use_fast=True)
    except (OSError, ValueError) as error:
        raise ModelFilesError(f"cannot read the tokenizer in {model_dir}: {error}") from error
    backend = getattr(hf, "backend_tokenizer", None)
    if backend is None or not isinstance(backend.model, tokenizer_models.WordPiece):
        kind = type(backend.model).__name__ if backend is not None else type(hf).__name__
        raise UnsupportedTokenizerError(
            f"the model in {model_dir} uses a {kind} tokenizer; the in-graph tokenizer supports WordPiece "
            "(BERT, DistilBERT, MiniLM, ELECTRA, MobileBERT families). Pick a WordPiece model."
        )
    vocab = model_dir / "vocab.txt"
    if not vocab.is_file():
        raise ModelFilesError(f"{model_dir} has no vocab.txt, which the in-graph WordPiece tokenizer reads")
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
    lower_case = bool(getattr(hf, "do_lower_case", False))
    strip_accents = getattr(hf, "strip_accents", None)
    return TokenizerSpec(
        vocab_path=str(vocab),
        vocab_size=len(hf),
        lower_case=lower_case,
        strip_accents=lower_case if strip_accents is None else bool(strip_accents),
        cls_id=hf.cls_token_id,
        sep_id=hf.sep_token_id,
        pad_id=hf.pad_token_id,
        unk_token=hf.unk_token,
        unk_id=hf.unk_token_id,
        model_input_names=tuple(hf.model_input_names),
        max_input_chars_per_word=backend.model.max_input_chars_per_word,
        placeholder=unicode_compat.placeholder_for(vocab_characters),
    )


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


def normalize(texts: tf.Tensor, spec: TokenizerSpec) -> tf.Tensor:
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


def longest_first_lengths(first: tf.Tensor, second: tf.Tensor, budget: int) -> tuple[tf.Tensor, tf.Tensor]:
    """Token counts each segment keeps under HF's `longest_first` truncation of a pair.

    Hand-written because tensorflow_text's trimmers break ties differently: this is the closed form of
    the `tokenizers` library (utils/truncation.rs): the shorter segment keeps all its tokens while it fits in
    half the budget, the longer takes the rest; otherwise both get half, the longer (the second on a tie)
    the odd token.
    """
    fits = first + second <= budget
    swap = first > second
    short = tf.minimum(first, second)
    half = tf.constant(budget // 2, first.dtype)
    short_kept = tf.where(short <= budget - short, short, half)
    long_kept = tf.where(short <= budget - short, budget - short, budget - half)
    first_kept = tf.where(fits, first, tf.where(swap, long_kept, short_kept))
    second_kept = tf.where(fits, second, tf.where(swap, short_kept, long_kept))
    return first_kept, second_kept


class InGraphTokenizer:
    """texts [N] (and text_pairs [N]) -> fixed-length input_ids / attention_mask (/ token_type_ids) and the
    untruncated token count ([CLS] a [SEP] b [SEP] for pairs, as HF builds it) and whether tokens were cut."""

    def __init__(self, spec: TokenizerSpec, max_seq_length: int, vocab_path: str | tf.Tensor | None = None):
        self.spec = spec
        self.max_seq_length = max_seq_length
        # HF limits words in characters, tensorflow_text in bytes: the byte bound admits every word HF
        # admits and _pieces applies HF's character bound.
        self._wordpiece = tf_text.WordpieceTokenizer(
            vocab_path if vocab_path is not None else spec.vocab_path,
            token_out_type=tf.int64,
            unknown_token=spec.unk_token,
            max_bytes_per_word=4 * spec.max_input_chars_per_word,
        )

    def _pieces(self, texts: tf.Tensor) -> tf.RaggedTensor:
        words = split_words(normalize(tf.reshape(texts, [-1]), self.spec))
        too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > self.spec.max_input_chars_per_word
        words = words.with_flat_values(tf.where(too_long, self.spec.unk_token, words.flat_values))
        pieces = self._wordpiece.tokenize(words)  # [N, words, pieces]
        # [N, pieces] as merge_dims(-2, -1) builds it (each text's words' pieces in a row), minus its validation
        # asserts: the composed splits are valid whenever both levels are.
        row_splits = tf.gather(pieces.values.row_splits, pieces.row_splits)
        return tf.RaggedTensor.from_row_splits(pieces.flat_values, row_splits, validate=False)

    def __call__(self, texts: tf.Tensor, text_pairs: tf.Tensor | None = None) -> dict[str, tf.Tensor]:
        pieces = self._pieces(texts)
        if text_pairs is None:
            token_count = pieces.row_lengths()
            budget = self.max_seq_length - 2  # [CLS] a [SEP]
            second, kept_first, kept_second = None, tf.minimum(token_count, budget), None
        else:
            second = self._pieces(text_pairs)
            first_count, second_count = pieces.row_lengths(), second.row_lengths()
            token_count = first_count + second_count
            budget = self.max_seq_length - 3  # [CLS] a [SEP] b [SEP]
            kept_first, kept_second = longest_first_lengths(first_count, second_count, budget)
        input_ids, attention_mask, token_type_ids = self._assemble(pieces, kept_first, second, kept_second)
        features = {
            INPUT_IDS: input_ids,
            ATTENTION_MASK: attention_mask,
            TOKEN_COUNT: token_count,
            TRUNCATED: token_count > budget,
        }
        if self.spec.takes_token_type_ids:
            features[TOKEN_TYPE_IDS] = token_type_ids
        return features

    def _assemble(
        self,
        first: tf.RaggedTensor,
        kept_first: tf.Tensor,
        second: tf.RaggedTensor | None,
        kept_second: tf.Tensor | None,
    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """[CLS] a [SEP] (b [SEP]) [PAD]... from the kept token counts: input_ids, attention_mask, token_type_ids.

        Hand-written as dense position arithmetic: tensorflow_text's combine_segments and pad_model_inputs build
        ragged ops with validation asserts, 40% of the tokenizer's graph building in each trace of preprocessing_fn
        (TFT traces it nine times a run), and run at serving. tokenizer_test checks it against HF's ids for singles
        and pairs.
        """
        length = self.max_seq_length
        cls, sep, pad = (tf.constant(i, tf.int64) for i in (self.spec.cls_id, self.spec.sep_id, self.spec.pad_id))
        positions = tf.range(length, dtype=tf.int64)[tf.newaxis, :]
        first_sep = kept_first[:, tf.newaxis] + 1
        # [CLS], then a's tokens (a's token i at position i + 1), then [SEP] from the first [SEP] on
        first_ids = first.to_tensor(default_value=pad, shape=[None, length])
        ids = tf.concat([tf.fill([tf.shape(first_ids)[0], 1], cls), first_ids[:, :-1]], axis=1)
        ids = tf.where(positions < first_sep, ids, sep)
        last_sep, token_type_ids = first_sep, tf.zeros_like(ids)
        if second is not None:
            last_sep = first_sep + kept_second[:, tf.newaxis] + 1
            in_second = (positions > first_sep) & (positions <= last_sep)  # b's tokens and its [SEP]: type 1
            # b's token i at position first_sep + 1 + i
            offsets = tf.clip_by_value(positions - first_sep - 1, 0, length - 1) + tf.zeros_like(ids)
            second_ids = tf.gather(second.to_tensor(default_value=pad, shape=[None, length]), offsets, batch_dims=1)
            ids = tf.where(in_second & (positions < last_sep), second_ids, ids)
            token_type_ids = tf.cast(in_second, tf.int64)
        in_sequence = positions <= last_sep
        return tf.where(in_sequence, ids, pad), tf.cast(in_sequence, tf.int64), token_type_ids
