"""In-graph tokenization that reproduces a Hugging Face model's fast tokenizer id for id, for every family.

Built once from a model directory's tokenizer files, used by Transform's preprocessing_fn and therefore inside
the exported serving graph. The family comes from what the tokenizer declares (its tokenizer.json: model type,
normalizer, pre-tokenizer), never from a class name:
- WordPiece with BERT's normalizer (wordpiece.py): BERT, MiniLM, DistilBERT, ELECTRA, MPNet ...
- SentencePiece Unigram with a Metaspace pre-tokenizer (spm_tokenizer.py): XLM-R, ALBERT, DeBERTa-v2/v3,
  CamemBERT, GTE-multilingual ...
- BPE with byte fallback over U+2581-joined text (byte_fallback_bpe.py): mmBERT, Gemma, Llama-2, Mistral ...
- byte-level BPE (byte_level_bpe.py): RoBERTa, DistilRoBERTa, ModernBERT (GPT-2's split), EuroBERT (Llama-3's) ...
Special tokens, pair layout and token types come from the tokenizer's post-processor (special_tokens.py);
truncation is HF's `longest_first`, padding on the right.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tensorflow as tf

from models.hub.pretrained import ModelFilesError, read_config
from models.names import MODEL_INPUT_FEATURES, TOKEN_COUNT, TOKEN_TYPE_IDS, TRUNCATED, WINDOW_MASK
from models.tokenizers import (
    byte_fallback_bpe,
    byte_level_bpe,
    declared_limits,
    special_tokens,
    spm_tokenizer,
    wordpiece,
)
from models.tokenizers.character_budget import TOKEN_CHARS_CAP, CharacterBudget, cut_texts
from models.tokenizers.combining_marks import limit_combining_runs
from models.tokenizers.tokenizer_errors import TokenizerFilesDisagree, UnsupportedTokenizerError
from models.tokenizers.windows import Windows

WORDPIECE, SENTENCEPIECE, BYTE_FALLBACK_BPE, BYTE_LEVEL_BPE = (
    "WordPiece",
    "SentencePiece",
    "BPE with byte fallback",
    "byte-level BPE",
)
SUPPORTED = (
    "WordPiece (BERT, MiniLM, DistilBERT, ELECTRA, MPNet), SentencePiece Unigram (XLM-R, ALBERT, DeBERTa-v3, "
    "CamemBERT, GTE-multilingual), BPE with byte fallback (mmBERT, Gemma, Llama-2) and byte-level BPE with GPT-2's "
    "or Llama-3's split (RoBERTa, ModernBERT, EuroBERT)"
)


@dataclasses.dataclass(frozen=True)
class TokenizerSpec:
    """What decides a model's ids: its family's settings, its special-token layout, padding and inputs."""

    family: str
    pieces: (
        wordpiece.WordPieceSpec
        | spm_tokenizer.SentencePieceSpec
        | byte_fallback_bpe.ByteFallbackBPESpec
        | byte_level_bpe.ByteLevelBPESpec
    )
    layout: special_tokens.Layout
    vocab_size: int
    pad_id: int
    unk_id: int
    model_input_names: tuple[str, ...]
    # The most characters of text one token stands for: the longest vocab entry, or WordPiece's longest word
    # it splits (a longer word is one [UNK]), at most TOKEN_CHARS_CAP; it bounds what a text keeps
    # (models/tokenizers/character_budget.py). `longest_token_chars`: the same before the cap.
    token_chars: int = 100
    longest_token_chars: int = 100

    def budget_note(self) -> str:
        """What `--check` says when the cap applies, else nothing."""
        if self.longest_token_chars <= self.token_chars:
            return ""
        return (
            f"its longest vocab entry is {self.longest_token_chars:,} characters; texts are cut counting at most "
            f"{self.token_chars} a token"
        )

    @property
    def takes_token_type_ids(self) -> bool:
        return TOKEN_TYPE_IDS in self.model_input_names

    @property
    def whitespace_makes_tokens(self) -> bool:
        """Byte-level BPE keeps every whitespace run as pre-tokens, and BPE over U+2581-joined text every space
        (so blanks count against the character budget); WordPiece and SentencePiece Unigram (Metaspace after a
        whitespace split) drop them."""
        return self.family in (BYTE_LEVEL_BPE, BYTE_FALLBACK_BPE)

    @property
    def folder_files(self) -> tuple[Path, ...]:
        """Files of the model folder the graph is built from besides tokenizer.json: the SentencePiece model, which
        transformers 5's save_pretrained does not write, so an export of the folder copies it."""
        if self.family == SENTENCEPIECE and self.pieces.in_folder:
            return (Path(self.pieces.model_path),)
        return ()

    @property
    def asset_path(self) -> str | None:
        """The file the graph reads at run time (the WordPiece vocab); the other families embed theirs."""
        return self.pieces.vocab_path if self.family == WORDPIECE else None


def tokenizer_spec(model_dir: str | Path) -> TokenizerSpec:
    """Reads the tokenizer through transformers itself, so its settings mean what HF means by them.

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
    tokenizer_json, vocab_size = model_dir / "tokenizer.json", _model_vocab_size(model_dir)
    if tokenizer_json.is_file():  # before transformers reads it: its counts and ids decide what reading costs
        declared_limits.read_checked(tokenizer_json, vocab_size)
    hf = _load_fast_tokenizer(model_dir)
    declared = json.loads(hf.backend_tokenizer.to_str())
    if not tokenizer_json.is_file():  # built by transformers from the folder's vocab files
        declared_limits.check_declared(declared, model_dir / "(its vocab files)", vocab_size)
    family = _family(declared, model_dir)
    unk_id = _unk_id(hf)
    if getattr(hf, "padding_side", "right") != "right":
        raise UnsupportedTokenizerError(f"the tokenizer in {model_dir} pads on the {hf.padding_side}; only right")
    try:
        pieces = FAMILIES[family].read(declared, hf, model_dir)
    except TokenizerFilesDisagree as error:
        raise ModelFilesError(f"the tokenizer files in {model_dir} disagree: {error}") from error
    except UnsupportedTokenizerError as error:
        raise UnsupportedTokenizerError(
            f"the {family} tokenizer in {model_dir} has {error}; supported: {SUPPORTED}"
        ) from error
    except FileNotFoundError as error:
        raise ModelFilesError(str(error)) from error
    longest = max(max(map(len, hf.get_vocab()), default=1), getattr(pieces, "max_input_chars_per_word", 0))
    layout = special_tokens.read_layout(hf.backend_tokenizer)
    declared_limits.check_special_count(max(layout.special_count(False), layout.special_count(True)), tokenizer_json)
    return TokenizerSpec(
        family=family,
        pieces=pieces,
        layout=layout,
        vocab_size=len(hf),
        pad_id=hf.pad_token_id if hf.pad_token_id is not None else 0,
        unk_id=unk_id,
        model_input_names=tuple(hf.model_input_names),
        token_chars=min(longest, TOKEN_CHARS_CAP),
        longest_token_chars=longest,
    )


def _model_vocab_size(model_dir: Path) -> int | None:
    """config.json's vocab_size: the embeddings every id must index (None: no config.json, or none stated)."""
    if not (model_dir / "config.json").is_file():
        return None
    size = read_config(model_dir).get("vocab_size")
    return size if isinstance(size, int) and size > 0 else None


def load_hf_tokenizer(model_dir: str | Path, **kwargs):
    """The folder's Hugging Face tokenizer, as transformers' AutoTokenizer reads it."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir, **kwargs)


# Files a tokenizer's vocabulary comes from; transformers 5 builds a tokenizer with an empty one without them.
VOCAB_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "*.model")
_TOKENIZER_FILES_HINT = (
    "A Hugging Face model folder holds tokenizer.json, or the vocab files its tokenizer class reads (vocab.txt; "
    "vocab.json + merges.txt; a SentencePiece .model), with tokenizer_config.json"
)


def _load_fast_tokenizer(model_dir: Path):
    if not any(next(model_dir.glob(pattern), None) for pattern in VOCAB_FILES):
        raise ModelFilesError(f"the tokenizer in {model_dir} has no vocabulary file. {_TOKENIZER_FILES_HINT}")
    try:
        hf = load_hf_tokenizer(model_dir)
    except (KeyboardInterrupt, SystemExit):
        raise
    # tokenizers reports a file it cannot parse as a bare Exception, and panics (pyo3's PanicException, a
    # BaseException) on some of what it reads
    except BaseException as error:
        raise ModelFilesError(
            f"cannot read the tokenizer in {model_dir}: {type(error).__name__}: {error}. {_TOKENIZER_FILES_HINT}"
        ) from error
    if getattr(hf, "backend_tokenizer", None) is None:
        raise UnsupportedTokenizerError(
            f"the tokenizer in {model_dir} ({type(hf).__name__}) has no fast (tokenizers) form to reproduce; "
            f"supported: {SUPPORTED}"
        )
    return hf


def _family(declared: dict, model_dir: Path) -> str:
    model_type = declared["model"]["type"]
    pre = declared.get("pre_tokenizer") or {}
    pre_steps = {step.get("type") for step in pre.get("pretokenizers", [pre])}
    if model_type == "WordPiece":
        return WORDPIECE
    if model_type == "BPE" and "ByteLevel" in pre_steps:
        return BYTE_LEVEL_BPE
    if model_type == "BPE" and ("Metaspace" in pre_steps or declared["model"].get("byte_fallback")):
        return BYTE_FALLBACK_BPE
    if model_type == "Unigram" and "Metaspace" in pre_steps:
        return SENTENCEPIECE
    raise UnsupportedTokenizerError(
        f"the model in {model_dir} uses a {model_type} tokenizer with pre-tokenizer {sorted(pre_steps - {None})}; "
        f"the in-graph tokenizer supports {SUPPORTED}. Pick a model of one of these families."
    )


def _sentencepiece_file(hf, model_dir: Path, declared: dict) -> Path:
    """The SentencePiece model the hub ships beside tokenizer.json (spiece.model, sentencepiece.bpe.model ...), or,
    for a folder transformers 5 saved (tokenizer.json alone), the model its Unigram declaration describes."""
    names = [name for name in getattr(hf, "vocab_files_names", {}).values() if name.endswith(".model")]
    found = [model_dir / name for name in names if (model_dir / name).is_file()] or sorted(model_dir.glob("*.model"))
    return found[0] if found else spm_tokenizer.written_model_path(declared, set(hf.all_special_tokens))


def _unk_id(hf) -> int:
    """The unknown token's id; -1 where the tokenizer has none (byte-level BPE needs none)."""
    return hf.unk_token_id if hf.unk_token_id is not None else -1


@dataclasses.dataclass(frozen=True)
class Family:
    """What a tokenizer family module answers: `read(declared, hf, model_dir)`, its settings (`pieces`) from the
    tokenizer transformers built; `in_graph(pieces, vocab_path)`, the op that splits texts into its ids."""

    read: Callable[[dict, Any, Path], Any]
    in_graph: Callable[[Any, str | tf.Tensor | None], Callable[[tf.Tensor], tf.RaggedTensor]]


FAMILIES = {
    WORDPIECE: Family(
        read=lambda declared, hf, model_dir: wordpiece.read_spec(declared, model_dir, hf.unk_token),
        in_graph=wordpiece.WordPiece,
    ),
    SENTENCEPIECE: Family(
        read=lambda declared, hf, model_dir: spm_tokenizer.read_spec(
            declared, _sentencepiece_file(hf, model_dir, declared), hf.get_vocab(), hf.unk_token_id
        ),
        in_graph=lambda pieces, _: spm_tokenizer.SentencePiece(pieces),
    ),
    BYTE_FALLBACK_BPE: Family(
        read=lambda declared, hf, _: byte_fallback_bpe.ByteFallbackBPESpec.from_tokenizer_json(declared, _unk_id(hf)),
        in_graph=lambda pieces, _: byte_fallback_bpe.ByteFallbackBPE(pieces),
    ),
    BYTE_LEVEL_BPE: Family(
        read=lambda declared, hf, _: byte_level_bpe.ByteLevelBPESpec.from_tokenizer_json(declared, _unk_id(hf)),
        in_graph=lambda pieces, _: byte_level_bpe.ByteLevelBPE(pieces),
    ),
}


def head_and_tail(pieces: tf.RaggedTensor, budget: int, head_share: float) -> tf.RaggedTensor:
    """Rows longer than `budget` cut to their first round(budget x head_share) tokens and their last ones up to the
    budget; shorter rows as they are. The conclusion of a review or a ticket's last message is often where its
    label is (Sun et al. 2019, "How to Fine-Tune BERT for Text Classification": head+tail beat head-only)."""
    head = round(budget * head_share)
    counts = pieces.row_lengths()
    positions = tf.ragged.range(counts)
    tail_start = tf.where(counts > budget, counts - (budget - head), counts)[:, tf.newaxis]
    keep = (positions < head) | (positions >= tail_start) | (counts <= budget)[:, tf.newaxis]
    return tf.ragged.boolean_mask(pieces, keep)


def split_windows(pieces: tf.RaggedTensor, windows: Windows) -> tuple[tf.RaggedTensor, tf.Tensor]:
    """[N, (T)] pieces -> [N x count, (<= budget)] windows of them, each document's in order, and which of
    them hold its tokens ([N, count] bool; a document's first window always does, even an empty one's)."""
    counts = pieces.row_lengths()
    index = tf.range(windows.count, dtype=tf.int64)[tf.newaxis, :]
    start = index * windows.step + tf.zeros_like(counts)[:, tf.newaxis]
    end = tf.maximum(tf.minimum(start + windows.budget, counts[:, tf.newaxis]), start)
    offset = pieces.row_starts()[:, tf.newaxis]
    positions = tf.ragged.range(tf.reshape(start + offset, [-1]), tf.reshape(end + offset, [-1]))
    needed = 1 + tf.maximum(tf.zeros_like(counts), -((windows.budget - counts) // windows.step))
    return tf.gather(pieces.values, positions), index < needed[:, tf.newaxis]


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


def character_budget(
    spec: TokenizerSpec, max_seq_length: int, head_share: float | None, windows: tuple[float, int] | None
) -> CharacterBudget:
    """What a text keeps before tokenizing: enough to hold every token the model reads (all its windows')."""
    reach = max_seq_length * (windows[1] if windows else 1)
    return CharacterBudget.reaching(
        reach, spec.token_chars, keep_tail=head_share is not None, counts_whitespace=spec.whitespace_makes_tokens
    )


class InGraphTokenizer:
    """texts [N] (and text_pairs [N]) -> fixed-length input_ids / attention_mask (/ token_type_ids) laid out as
    the model's tokenizer lays them out, the untruncated token count (special tokens excluded) and whether
    tokens were cut."""

    def __init__(
        self,
        spec: TokenizerSpec,
        max_seq_length: int,
        vocab_path: str | tf.Tensor | None = None,
        head_share: float | None = None,
        windows: tuple[float, int] | None = None,
        counted_tokens: int | None = None,
    ):
        """`head_share`: a single text longer than the budget keeps that share of it from its start and the rest
        from its end (`model.long_texts: head_tail`); None keeps the start only, as HF's truncation does.
        `windows` (stride, count): a single text is split into `count` overlapping windows (`model.long_texts:
        windows`); each model input is then [N, count x max_seq_length] and WINDOW_MASK says which hold text.
        Texts are first cut to `character_budget` (so a request's work is bounded). `counted_tokens`: texts are for
        counting their tokens (the run's length choices and drift), never a model's graph: they are cut to the
        budget reaching that many tokens instead, so counts up to it are exact and longer texts count past it."""
        specials = spec.layout.special_count(pair=True)
        if specials >= max_seq_length and not counted_tokens:  # a count's width is arbitrary: no text is kept
            raise UnsupportedTokenizerError(
                f"the tokenizer puts {specials} special tokens around a pair of texts, which leaves no room for text "
                f"at width {max_seq_length}: use a wider model.max_seq_length or the model's own tokenizer"
            )
        self.spec = spec
        self.max_seq_length = max_seq_length
        self.head_share = head_share
        self.windows = (
            None if windows is None else Windows.over(max_seq_length, spec.layout.special_count(False), *windows)
        )
        self.character_budget = (
            character_budget(spec, counted_tokens, None, None)
            if counted_tokens
            else character_budget(spec, max_seq_length, head_share, windows)
        )
        self._pieces = FAMILIES[spec.family].in_graph(spec.pieces, vocab_path)

    def __call__(self, texts: tf.Tensor, text_pairs: tf.Tensor | None = None) -> dict[str, tf.Tensor]:
        if self.character_budget is not None:
            texts = cut_texts(texts, self.character_budget)
            text_pairs = None if text_pairs is None else cut_texts(text_pairs, self.character_budget)
        texts = limit_combining_runs(texts)  # before any family normalizes them (quadratic in a run's length)
        text_pairs = None if text_pairs is None else limit_combining_runs(text_pairs)
        first = self._pieces(texts)
        pair = text_pairs is not None
        budget = self.max_seq_length - self.spec.layout.special_count(pair)
        window_mask = None
        if not pair:
            token_count = first.row_lengths()
            truncated = token_count > budget
            if self.head_share is not None:
                first = head_and_tail(first, budget, self.head_share)
            if self.windows is not None:
                first, window_mask = split_windows(first, self.windows)
                truncated = token_count > self.windows.budget + self.windows.step * (self.windows.count - 1)
            segments, kept = [first], [tf.minimum(first.row_lengths(), budget)]
        else:
            second = self._pieces(text_pairs)
            first_count, second_count = first.row_lengths(), second.row_lengths()
            segments, token_count = [first, second], first_count + second_count
            kept = list(longest_first_lengths(first_count, second_count, budget))
            truncated = token_count > budget
        slots = self.spec.layout.pair if pair else self.spec.layout.single
        inputs = dict(
            zip(
                MODEL_INPUT_FEATURES,
                special_tokens.assemble(slots, segments, kept, self.max_seq_length, self.spec.pad_id),
                strict=True,
            )
        )
        if not self.spec.takes_token_type_ids:
            del inputs[TOKEN_TYPE_IDS]
        features = {TOKEN_COUNT: token_count, TRUNCATED: truncated}
        if window_mask is not None:  # each document's windows side by side: [N, count x max_seq_length]
            width = self.windows.count * self.max_seq_length
            inputs = {name: tf.reshape(value, [-1, width]) for name, value in inputs.items()}
            features[WINDOW_MASK] = tf.cast(window_mask, tf.int64)
        return {**inputs, **features}
