"""In-graph SentencePiece (XLM-R, ALBERT, DeBERTa-v2/v3, CamemBERT): texts -> the ids transformers gives.

The model's own .model file (or one rebuilt from tokenizer.json) runs in tensorflow_text's SentencepieceOp (linked
by TF Serving), which applies the model's precompiled normalization and its Unigram segmentation (SentencePiece BPE
runs from tokenizer.json's merges: byte_fallback_bpe.py). Around it, what the HF tokenizer declares and
SentencePiece does not do: the normalizer steps before `Precompiled` (ALBERT's quote replacement, NFKD, accent
stripping, lower-casing), the piece -> id mapping (XLM-R's fairseq offset, looked up piece by
piece, never assumed), and how the text's whitespace is split:
- transformers 5 (XLM-R, ALBERT, CamemBERT) splits on Unicode whitespace before Metaspace: every White_Space
  character the model's normalization keeps becomes a space, and no "▁" is kept for a text's trailing space;
- transformers 4's tokenizer.json (Metaspace alone) keeps one trailing "▁" where its normalizer does not strip the
  text's end;
- transformers 5's DeBERTa-v2/v3 tokenizer normalizes with its own steps and not with the model's charsmap: the
  .model then runs with SentencePiece's identity normalization, after those steps and Metaspace's prefix.
The tokenizer read is the one transformers builds (its class's pipeline, not necessarily the folder's
tokenizer.json), so the ids are those `AutoTokenizer` gives.

Where a segmentation ties (two orders of the same pieces scoring the same), SentencePiece and so
transformers' slow tokenizer pick one, `tokenizers`' Viterbi the other: this follows SentencePiece.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import math
import re
import sys
import unicodedata
from pathlib import Path

import tensorflow as tf
import tensorflow_text as tf_text

from models.tokenizers.tokenizer_errors import TokenizerFilesDisagree, UnsupportedTokenizerError
from models.tokenizers.written_files import content_named_file, is_written

METASPACE = "▁"
# Unicode White_Space, what `tokenizers` (Rust's char::is_whitespace) strips; RE2's `\s` is ASCII only.
WHITE_SPACE = r"\t\n\x{0B}\f\r \x{85}\p{Z}"


@dataclasses.dataclass(frozen=True)
class SentencePieceSpec:
    """What the in-graph SentencePiece reads: the model file, the id mapping and HF's steps around it."""

    model_path: str
    hf_ids: tuple[int, ...]  # SentencePiece id -> HF id
    # ("replace", old, new) | ("regex", RE2 pattern, new) | ("nfkd",) | ("strip_accents",) | ("prefix_space",) ...
    pre_normalizers: tuple[tuple[str, ...], ...]
    trailing_space_id: int | None  # HF id of the "▁" a text ending in whitespace gets (None: no such piece)
    spaces: str  # characters the model's normalization turns into a space
    dropped: str  # characters it removes
    identity: bool = False  # the model's own normalization is off: HF's steps replace it

    @property
    def in_folder(self) -> bool:
        """The model file is the folder's own, not one written from its tokenizer.json (written_model_path)."""
        return not is_written(self.model_path, _WRITTEN_PREFIX)


def _steps(node: dict | None, key: str) -> list[dict]:
    if not node:
        return []
    return node.get(key, [node]) if node.get("type") == "Sequence" else [node]


def _pre_normalizer(step: dict) -> tuple[str, ...]:
    kind = step["type"]
    if kind == "Replace":
        pattern = step["pattern"]
        if "String" in pattern:
            return ("replace", pattern["String"], step["content"])
        return ("regex", _compiled_by_re2(_unicode_classes(pattern["Regex"])), step["content"])
    if kind in ("NFKD", "NFKC", "NFD", "NFC"):
        return (kind.lower(),)
    if kind == "StripAccents":
        return ("strip_accents",)
    if kind == "Lowercase":
        return ("lowercase",)
    if kind == "Strip":
        return ("strip", str(step.get("strip_left", True)), str(step.get("strip_right", True)))
    raise UnsupportedTokenizerError(f"normalizer step {kind}")


def _compiled_by_re2(pattern: str) -> str:
    """`pattern` once RE2, TensorFlow's regex engine, has compiled it: one it refuses (Oniguruma, which tokenizers
    runs, takes more) is named now, not as an op error at the first text (checked where the spec is read eagerly, as
    the preflight reads it; inside a graph being traced nothing would run)."""
    try:
        with tf.init_scope():
            if tf.executing_eagerly():
                tf.strings.regex_replace(tf.constant([""]), pattern, "")
    except (tf.errors.InvalidArgumentError, ValueError) as error:
        message = getattr(error, "message", str(error)).splitlines()[0]
        raise UnsupportedTokenizerError(
            f"normalizer Replace with the regex {pattern!r}, which RE2 cannot compile ({message})"
        ) from None
    return pattern


def _unicode_classes(pattern: str) -> str:
    """An Oniguruma pattern (what `tokenizers` runs) for RE2, whose `\\s` is ASCII only: as Unicode White_Space."""
    if "\\p" in pattern or "(?" in pattern:
        raise UnsupportedTokenizerError(f"normalizer Replace with the regex {pattern!r}")
    out, in_class = [], False
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and pattern[index + 1 : index + 2] == "s":
            out.append(WHITE_SPACE if in_class else f"[{WHITE_SPACE}]")
            index += 2
            continue
        if char == "\\":
            out.append(pattern[index : index + 2])
            index += 2
            continue
        in_class = {"[": True, "]": False}.get(char, in_class)
        out.append(char)
        index += 1
    return "".join(out)


_WRITTEN_PREFIX = "hftfx-spm-"


def written_model_path(tokenizer_json: dict, special_tokens: set[str]) -> Path:
    """model_from_tokenizer_json's model as a file (the op and its checks read a path), as the WordPiece vocab
    written from tokenizer.json is."""
    return content_named_file(model_from_tokenizer_json(tokenizer_json, special_tokens), _WRITTEN_PREFIX, ".model")


def read_spec(tokenizer_json: dict, model_path: Path, hf_vocab: dict[str, int], unk_id: int) -> SentencePieceSpec:
    """The spec from the HF tokenizer's declaration and the SentencePiece model beside it (or written from it)."""
    import sentencepiece

    model_bytes = model_path.read_bytes()
    processor = sentencepiece.SentencePieceProcessor(model_proto=model_bytes)
    proto = _model_proto(model_bytes)
    _check_pieces_agree(proto, tokenizer_json, model_path.name)
    normalizers = _steps(tokenizer_json.get("normalizer"), "normalizers")
    splits_on_whitespace = _check_metaspace(tokenizer_json.get("pre_tokenizer"))
    hf_ids = tuple(hf_vocab.get(processor.id_to_piece(i), unk_id) for i in range(processor.get_piece_size()))
    kinds = [step["type"] for step in normalizers]
    if "Precompiled" not in kinds and proto.normalizer_spec.precompiled_charsmap:
        # transformers 5's DeBERTa-v2: its own steps instead of the model's charsmap, then Metaspace's prefix
        steps = (*(_pre_normalizer(step) for step in normalizers), ("prefix_space",))
        return SentencePieceSpec(str(model_path), hf_ids, steps, None, "", "", identity=True)
    if "Precompiled" in kinds:
        at = kinds.index("Precompiled")
        charsmap = base64.b64decode(normalizers[at]["precompiled_charsmap"] or "")
        if charsmap != proto.normalizer_spec.precompiled_charsmap:
            raise UnsupportedTokenizerError(f"tokenizer.json's Precompiled normalizer differs from {model_path.name}'s")
        before, after = normalizers[:at], normalizers[at + 1 :]
    else:
        before, after = normalizers, []
    for step in after:
        if step["type"] not in ("Strip", "Replace") or (
            step["type"] == "Replace" and step["pattern"].get("Regex") != " {2,}"
        ):
            raise UnsupportedTokenizerError(f"normalizer step {step['type']} after Precompiled")
    # A Strip before Precompiled leaves characters that the charsmap then turns into spaces (DeBERTa-v3).
    strips_end = splits_on_whitespace or any(
        step["type"] == "Strip" and step.get("strip_right", True) for step in after
    )
    spaces, dropped = _whitespace_treatment(processor)
    steps = tuple(_pre_normalizer(step) for step in before)
    if splits_on_whitespace:  # what the charsmap keeps of Unicode whitespace, WhitespaceSplit still splits on
        kept = "".join(c for c in _white_space() if c not in spaces + dropped)
        steps = (*steps, ("regex", f"[{_escaped(kept)}]", " ")) if kept else steps
    return SentencePieceSpec(
        model_path=str(model_path),
        hf_ids=hf_ids,
        pre_normalizers=steps,
        trailing_space_id=None if strips_end else hf_vocab.get(METASPACE, unk_id),
        spaces=spaces,
        dropped=dropped,
    )


_SEPARATORS = ("Zs", "Zl", "Zp")


@functools.cache
def _separators_controls_and_formats() -> str:
    """Every separator, control and format character, in code point order: one scan of the code space a process
    (a quarter of a second here), shared by the whitespace checks of every SentencePiece spec."""
    categories = (*_SEPARATORS, "Cc", "Cf")
    return "".join(chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) in categories)


def _white_space() -> str:
    """Unicode's White_Space characters: what `tokenizers`' WhitespaceSplit splits on (Rust's char::is_whitespace)."""
    separators = (c for c in _separators_controls_and_formats() if unicodedata.category(c) in _SEPARATORS)
    return "\t\n\x0b\f\r \x85" + "".join(separators)


def _check_metaspace(pre_tokenizer: dict | None) -> bool:
    """Checks for Metaspace, prefixing always; True where a WhitespaceSplit comes first (transformers 5)."""
    steps = _steps(pre_tokenizer, "pretokenizers")
    kinds = [step["type"] for step in steps]
    if kinds not in (["Metaspace"], ["WhitespaceSplit", "Metaspace"]):
        raise UnsupportedTokenizerError(f"pre-tokenizer {kinds} (SentencePiece needs Metaspace)")
    step = steps[-1]
    if step.get("prepend_scheme", "always" if step.get("add_prefix_space", True) else "never") != "always":
        raise UnsupportedTokenizerError(f"Metaspace prepend_scheme {step.get('prepend_scheme')!r}")
    return kinds[0] == "WhitespaceSplit"


_BYTE_PIECE = re.compile(r"<0x[0-9A-F]{2}>")


def model_from_tokenizer_json(tokenizer_json: dict, special_tokens: set[str]) -> bytes:
    """The SentencePiece model a Unigram tokenizer.json declares: its pieces and scores in id order, the unknown
    piece, byte fallback, special tokens as control pieces and the normalizer's precompiled charsmap, with
    SentencePiece's default whitespace handling (the dummy prefix Metaspace adds, runs of spaces collapsed).

    transformers 5 saves SentencePiece tokenizers as tokenizer.json alone, while tensorflow_text's op runs a
    ModelProto: it is written from the declaration, as transformers' convert_slow_tokenizer goes the other way.
    """
    from sentencepiece import sentencepiece_model_pb2 as spm

    model = tokenizer_json["model"]
    if model.get("type") != "Unigram":
        raise UnsupportedTokenizerError(f"a SentencePiece {model.get('type')} model without its .model file")
    proto = spm.ModelProto()
    trainer, normalizer = proto.trainer_spec, proto.normalizer_spec
    trainer.model_type, trainer.vocab_size = spm.TrainerSpec.UNIGRAM, len(model["vocab"])
    trainer.unk_id, trainer.bos_id, trainer.eos_id, trainer.pad_id = model.get("unk_id") or 0, -1, -1, -1
    trainer.byte_fallback = bool(model.get("byte_fallback"))
    for index, (piece, score) in enumerate(model["vocab"]):
        kind = spm.ModelProto.SentencePiece.NORMAL
        if index == trainer.unk_id:
            kind = spm.ModelProto.SentencePiece.UNKNOWN
        elif piece in special_tokens:
            kind = spm.ModelProto.SentencePiece.CONTROL
        elif trainer.byte_fallback and _BYTE_PIECE.fullmatch(piece):
            kind = spm.ModelProto.SentencePiece.BYTE
        proto.pieces.add(piece=piece, score=score, type=kind)
    steps = _steps(tokenizer_json.get("normalizer"), "normalizers")
    charsmaps = [base64.b64decode(s["precompiled_charsmap"] or "") for s in steps if s["type"] == "Precompiled"]
    normalizer.name, normalizer.precompiled_charsmap = "tokenizer_json", charsmaps[0] if charsmaps else b""
    normalizer.add_dummy_prefix = normalizer.remove_extra_whitespaces = normalizer.escape_whitespaces = True
    return proto.SerializeToString()


def _check_pieces_agree(proto, tokenizer_json: dict, name: str) -> None:
    """The .model's pieces are tokenizer.json's, score for score: the graph runs the .model, transformers the
    tokenizer.json, so a folder where they differ would give other ids than transformers (a .model from another
    checkpoint, a tokenizer.json edited or retrained)."""
    from sentencepiece import sentencepiece_model_pb2 as spm

    declared = {piece: score for piece, score in tokenizer_json["model"]["vocab"]}
    differing = [
        piece.piece
        for piece in proto.pieces
        if piece.type == spm.ModelProto.SentencePiece.NORMAL
        and abs(declared.get(piece.piece, math.inf) - piece.score) > 1e-5 * max(1.0, abs(piece.score))
    ]
    if differing:
        raise TokenizerFilesDisagree(
            f"{name} differs from tokenizer.json, which transformers reads, in {len(differing):,} pieces or their "
            f"scores (first {differing[:3]}): remove {name} (the model is then rebuilt from tokenizer.json) or save "
            "the folder again with save_pretrained"
        )


def _model_proto(model_bytes: bytes):
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model_bytes)
    return proto


def _whitespace_treatment(processor) -> tuple[str, str]:
    """Which whitespace, control and format characters the model's normalization makes a space or drops,
    asked of SentencePiece itself: a text's end is whitespace to HF's fast tokenizer by the same measure."""
    spaces, dropped = [], []
    for char in _separators_controls_and_formats():
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
        elif kind == "regex":
            texts = tf.strings.regex_replace(texts, step[1], step[2].replace("\\", "\\\\"))
        elif kind == "prefix_space":  # Metaspace's prefix, where the text does not start with a space already
            texts = tf.strings.regex_replace(texts, "^([^ ])", " \\1")
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


def _identity_normalization(model_bytes: bytes) -> bytes:
    """The model with SentencePiece's own normalization off: spaces become "▁", nothing else changes."""
    proto = _model_proto(model_bytes)
    spec = proto.normalizer_spec
    spec.name, spec.precompiled_charsmap = "identity", b""
    spec.add_dummy_prefix, spec.remove_extra_whitespaces, spec.escape_whitespaces = False, False, True
    return proto.SerializeToString()


class SentencePiece:
    """texts [N] -> HF ids [N, tokens] (ragged), special tokens not added."""

    def __init__(self, spec: SentencePieceSpec):
        self.spec = spec
        model = Path(spec.model_path).read_bytes()
        self._tokenizer = tf_text.SentencepieceTokenizer(
            model=_identity_normalization(model) if spec.identity else model, out_type=tf.int32
        )
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
