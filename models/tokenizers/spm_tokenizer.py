"""In-graph SentencePiece (XLM-R, ALBERT, DeBERTa-v2/v3, CamemBERT): texts -> the ids transformers gives.

The model's own .model file runs in tensorflow_text's SentencepieceOp (linked by TF Serving), which applies
the model's precompiled normalization and its Unigram or BPE segmentation. Around it, what the HF tokenizer
declares in tokenizer.json and SentencePiece does not do: the normalizer steps before `Precompiled` (ALBERT's
quote replacement, NFKD, accent stripping, lower-casing), the piece -> id mapping (XLM-R's fairseq offset,
looked up piece by piece, never assumed), and the trailing "▁" HF's fast tokenizer keeps where its
normalizer does not strip the text's end (ALBERT).

Where a segmentation ties (two orders of the same pieces scoring the same), SentencePiece and so
transformers' slow tokenizer pick one, `tokenizers`' Viterbi the other: this follows SentencePiece.
"""

from __future__ import annotations

import base64
import dataclasses
import sys
import unicodedata
from pathlib import Path

import tensorflow as tf
import tensorflow_text as tf_text

from models.tokenizers.tokenizer_errors import UnsupportedTokenizerError

METASPACE = "▁"
# Unicode White_Space, what `tokenizers` (Rust's char::is_whitespace) strips; RE2's `\s` is ASCII only.
WHITE_SPACE = r"\t\n\x{0B}\f\r \x{85}\p{Z}"


@dataclasses.dataclass(frozen=True)
class SentencePieceSpec:
    """What the in-graph SentencePiece reads: the model file, the id mapping and HF's steps around it."""

    model_path: str
    hf_ids: tuple[int, ...]  # SentencePiece id -> HF id
    pre_normalizers: tuple[tuple[str, ...], ...]  # ("replace", old, new) | ("nfkd",) | ("strip_accents",) | ...
    trailing_space_id: int | None  # HF id of the "▁" a text ending in whitespace gets (None: no such piece)
    spaces: str  # characters the model's normalization turns into a space
    dropped: str  # characters it removes


def _steps(node: dict | None, key: str) -> list[dict]:
    if not node:
        return []
    return node.get(key, [node]) if node.get("type") == "Sequence" else [node]


def _pre_normalizer(step: dict) -> tuple[str, ...]:
    kind = step["type"]
    if kind == "Replace":
        pattern = step["pattern"]
        if "String" not in pattern:
            raise UnsupportedTokenizerError(f"normalizer Replace with a regex {pattern} before Precompiled")
        return ("replace", pattern["String"], step["content"])
    if kind in ("NFKD", "NFKC", "NFD", "NFC"):
        return (kind.lower(),)
    if kind == "StripAccents":
        return ("strip_accents",)
    if kind == "Lowercase":
        return ("lowercase",)
    if kind == "Strip":
        return ("strip", str(step.get("strip_left", True)), str(step.get("strip_right", True)))
    raise UnsupportedTokenizerError(f"normalizer step {kind}")


def read_spec(tokenizer_json: dict, model_path: Path, hf_vocab: dict[str, int], unk_id: int) -> SentencePieceSpec:
    """The spec from the HF tokenizer's declaration and the SentencePiece model beside it."""
    import sentencepiece

    model_bytes = model_path.read_bytes()
    processor = sentencepiece.SentencePieceProcessor(model_proto=model_bytes)
    proto = _model_proto(model_bytes)
    normalizers = _steps(tokenizer_json.get("normalizer"), "normalizers")
    kinds = [step["type"] for step in normalizers]
    if "Precompiled" in kinds:
        at = kinds.index("Precompiled")
        charsmap = base64.b64decode(normalizers[at]["precompiled_charsmap"] or "")
        if charsmap != proto.normalizer_spec.precompiled_charsmap:
            raise UnsupportedTokenizerError(f"tokenizer.json's Precompiled normalizer differs from {model_path.name}'s")
        before, after = normalizers[:at], normalizers[at + 1 :]
    elif proto.normalizer_spec.precompiled_charsmap:
        raise UnsupportedTokenizerError(f"{model_path.name} normalizes text but tokenizer.json does not")
    else:
        before, after = normalizers, []
    for step in after:
        if step["type"] not in ("Strip", "Replace") or (
            step["type"] == "Replace" and step["pattern"].get("Regex") != " {2,}"
        ):
            raise UnsupportedTokenizerError(f"normalizer step {step['type']} after Precompiled")
    _check_metaspace(tokenizer_json.get("pre_tokenizer"))
    # A Strip before Precompiled leaves characters that the charsmap then turns into spaces (DeBERTa-v3).
    strips_end = any(step["type"] == "Strip" and step.get("strip_right", True) for step in after)
    spaces, dropped = _whitespace_treatment(processor)
    return SentencePieceSpec(
        model_path=str(model_path),
        hf_ids=tuple(hf_vocab.get(processor.id_to_piece(i), unk_id) for i in range(processor.get_piece_size())),
        pre_normalizers=tuple(_pre_normalizer(step) for step in before),
        trailing_space_id=None if strips_end else hf_vocab.get(METASPACE, unk_id),
        spaces=spaces,
        dropped=dropped,
    )


def _check_metaspace(pre_tokenizer: dict | None) -> None:
    steps = _steps(pre_tokenizer, "pretokenizers")
    if [step["type"] for step in steps] != ["Metaspace"]:
        raise UnsupportedTokenizerError(
            f"pre-tokenizer {[step['type'] for step in steps]} (SentencePiece needs Metaspace)"
        )
    step = steps[0]
    if step.get("prepend_scheme", "always" if step.get("add_prefix_space", True) else "never") != "always":
        raise UnsupportedTokenizerError(f"Metaspace prepend_scheme {step.get('prepend_scheme')!r}")


def _model_proto(model_bytes: bytes):
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model_bytes)
    return proto


def _whitespace_treatment(processor) -> tuple[str, str]:
    """Which whitespace, control and format characters the model's normalization makes a space or drops,
    asked of SentencePiece itself: a text's end is whitespace to HF's fast tokenizer by the same measure."""
    spaces, dropped = [], []
    candidates = (chr(c) for c in range(sys.maxunicode + 1))
    for char in (c for c in candidates if unicodedata.category(c) in ("Zs", "Zl", "Zp", "Cc", "Cf")):
        normalized = processor.normalize(f"a{char}b")
        if normalized in ("a b", f"a{METASPACE}b", f"{METASPACE}a{METASPACE}b"):
            spaces.append(char)
        elif normalized in ("ab", f"{METASPACE}ab"):
            dropped.append(char)
    return "".join(spaces), "".join(dropped)


def _escaped(characters: str) -> str:
    """Each character as an RE2 \\x{...} escape: literal text in a pattern, or a character class's body."""
    return "".join(f"\\x{{{ord(c):X}}}" for c in characters)


# Stands in for NUL through the normalizing ops, which end a string at a NUL byte: a noncharacter, which
# SentencePiece, like NUL, cannot segment (both become the unknown piece).
_NUL_STAND_IN = "\U0010ffff"


def pre_normalize(texts: tf.Tensor, steps: tuple[tuple[str, ...], ...]) -> tf.Tensor:
    """The HF normalizer steps that come before SentencePiece's own normalization."""
    if not steps:
        return texts
    texts = tf.strings.regex_replace(texts, r"\x00", _NUL_STAND_IN)
    for step in steps:
        kind = step[0]
        if kind == "replace":
            texts = tf.strings.regex_replace(texts, _escaped(step[1]), step[2].replace("\\", "\\\\"))
        elif kind in ("nfkd", "nfkc", "nfd", "nfc"):
            texts = tf_text.normalize_utf8(texts, kind.upper())
        elif kind == "strip_accents":  # `tokenizers`' StripAccents drops every mark (Mn, Mc, Me)
            texts = tf.strings.regex_replace(texts, r"\p{M}", "")
        elif kind == "lowercase":
            # HF lower-cases char by char; ICU's string lowering turns a word-final capital sigma into 'ς'.
            texts = tf.strings.lower(tf.strings.regex_replace(texts, "Σ", "σ"), encoding="utf-8")  # noqa: RUF001
        elif kind == "strip":
            if step[1] == "True":
                texts = tf.strings.regex_replace(texts, f"^[{WHITE_SPACE}]+", "")
            if step[2] == "True":
                texts = tf.strings.regex_replace(texts, f"[{WHITE_SPACE}]+$", "")
    return tf.strings.regex_replace(texts, _NUL_STAND_IN, "\x00")


class SentencePiece:
    """texts [N] -> HF ids [N, tokens] (ragged), special tokens not added."""

    def __init__(self, spec: SentencePieceSpec):
        self.spec = spec
        self._tokenizer = tf_text.SentencepieceTokenizer(model=Path(spec.model_path).read_bytes(), out_type=tf.int32)
        self._hf_ids = tf.constant(spec.hf_ids, tf.int64)

    def __call__(self, texts: tf.Tensor) -> tf.RaggedTensor:
        texts = pre_normalize(tf.reshape(texts, [-1]), self.spec.pre_normalizers)
        pieces = self._tokenizer.tokenize(texts)
        ids = pieces.with_flat_values(tf.gather(self._hf_ids, pieces.flat_values))
        if self.spec.trailing_space_id is None:
            return ids
        # HF's fast tokenizer keeps one "▁" for whitespace at the end when its normalizer does not strip it.
        dropped = f"[{_escaped(self.spec.dropped)}]*" if self.spec.dropped else ""
        ends_in_space = tf.strings.regex_full_match(texts, f"(?s).*[{_escaped(self.spec.spaces)}]{dropped}")
        extra = tf.RaggedTensor.from_row_lengths(
            tf.fill(
                [tf.reduce_sum(tf.cast(ends_in_space, tf.int64))], tf.constant(self.spec.trailing_space_id, tf.int64)
            ),
            tf.cast(ends_in_space, tf.int64),
        )
        return tf.concat([ids, extra], axis=1)
