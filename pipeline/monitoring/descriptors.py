"""What the monitor compares, per text: its length, its tokens by the served model's own tokenizer, the share of them
the vocab could not represent, its script, and the model's answer (Evidently's text descriptors, and the model's
outputs, which NannyML and Vertex's monitoring read)."""

from __future__ import annotations

import dataclasses
import unicodedata
from collections import Counter
from collections.abc import Sequence

import numpy as np

from models.names import (
    EXAMPLES_INPUT,
    REPRESENTATION,
    SERVING_DEFAULT,
    TEXT_FEATURE,
    TOKEN_COUNT,
    TRANSFORM_FEATURES,
    UNKNOWN_TOKENS,
)

BATCH = 256  # texts per model call
SCRIPT_CHARS = 2_000  # a text's script is read from its first characters: enough to name it, bounded per text
NO_LETTERS = "none"


@dataclasses.dataclass(frozen=True)
class Described:
    """One row per text; `tokens` and `unknown_share` are None where only hashes of the texts were logged."""

    chars: np.ndarray
    probabilities: np.ndarray  # [texts, labels]
    tokens: np.ndarray | None = None
    unknown_share: np.ndarray | None = None
    scripts: tuple[str, ...] | None = None
    texts: tuple[str, ...] | None = None

    def __len__(self) -> int:
        return len(self.chars)

    def take(self, rows: np.ndarray) -> Described:
        """The given rows, as another Described."""

        def pick(value):
            if value is None:
                return None
            return value[rows] if isinstance(value, np.ndarray) else tuple(value[i] for i in rows)

        return Described(**{f.name: pick(getattr(self, f.name)) for f in dataclasses.fields(self)})


def script(text: str) -> str:
    """The script most of a text's letters are written in (the first word of their Unicode names: LATIN, CYRILLIC,
    CJK, ARABIC, ...); NO_LETTERS when it has none."""
    counts = Counter(
        unicodedata.name(char, "?").split(" ", 1)[0] for char in text[:SCRIPT_CHARS] if char.isalpha()
    )
    return counts.most_common(1)[0][0] if counts else NO_LETTERS


def token_descriptors(model, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(tokens per text, share of them unknown to the vocab) by the served model's transform_features signature."""
    import tensorflow as tf

    from models.serving.tf_serving import serialized_example

    tokens, unknown = [], []
    signature = model.signatures[TRANSFORM_FEATURES]
    for start in range(0, len(texts), BATCH):
        examples = [serialized_example({TEXT_FEATURE: text}) for text in texts[start : start + BATCH]]
        out = signature(**{EXAMPLES_INPUT: tf.constant(examples)})
        tokens.append(out[TOKEN_COUNT].numpy().reshape(-1))
        unknown.append(out[UNKNOWN_TOKENS].numpy().reshape(-1) if UNKNOWN_TOKENS in out else tokens[-1] * 0)
    count = np.concatenate(tokens).astype(np.int64) if tokens else np.zeros(0, np.int64)
    share = np.concatenate(unknown) / np.maximum(count, 1) if unknown else np.zeros(0)
    return count, np.minimum(share, 1.0)


def model_probabilities(model, texts: Sequence[str]) -> np.ndarray:
    """The served model's probabilities [texts, labels] through serving_default, as a client gets them."""
    import tensorflow as tf

    signature = model.signatures[SERVING_DEFAULT]
    parts = [
        signature(**{TEXT_FEATURE: tf.constant(list(texts[start : start + BATCH]))})["probabilities"].numpy()
        for start in range(0, len(texts), BATCH)
    ]
    return np.concatenate(parts) if parts else np.zeros((0, 0))


def representation_of(model):
    """texts -> the served model's representation of each [texts, hidden], through its representation signature;
    None for an export without one (pushed before it existed) or that reads text pairs."""
    import tensorflow as tf

    signature = model.signatures.get(REPRESENTATION)
    if signature is None or set(signature.structured_input_signature[1]) != {TEXT_FEATURE}:
        return None

    def embed(texts: Sequence[str]) -> np.ndarray:
        parts = [
            signature(**{TEXT_FEATURE: tf.constant(list(texts[start : start + BATCH]))})[REPRESENTATION].numpy()
            for start in range(0, len(texts), BATCH)
        ]
        return np.concatenate(parts) if parts else np.zeros((0, 0), np.float32)

    return embed


def _described(model, texts: Sequence[str], chars: np.ndarray, probabilities: np.ndarray) -> Described:
    """`texts` with every descriptor read from them, beside their lengths and answers."""
    tokens, unknown = token_descriptors(model, texts)
    return Described(chars, probabilities, tokens, unknown, tuple(script(t) for t in texts), tuple(texts))


def describe_texts(model, texts: Sequence[str]) -> Described:
    """Texts the model has not answered yet (the training data's): every descriptor, the answer computed here."""
    chars = np.array([len(t) for t in texts], np.int64)
    return _described(model, texts, chars, model_probabilities(model, texts))


def describe_logged(model, rows: Sequence[dict]) -> Described:
    """Logged rows: the answer as it was served; the token descriptors only where the texts were logged."""
    probabilities = np.array([row["probabilities"] for row in rows], np.float64)
    chars = np.array([int(row.get("chars", 0)) for row in rows], np.int64)
    if not rows or any(TEXT_FEATURE not in row for row in rows):
        return Described(chars=chars, probabilities=probabilities)
    return _described(model, [row[TEXT_FEATURE] for row in rows], chars, probabilities)
