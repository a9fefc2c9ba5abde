"""Loading a pushed model and calling it the way TF Serving does (SavedModel + named signature)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import tensorflow as tf
import tensorflow_text  # noqa: F401  (the transform graph's ops must be registered before loading)

from models.errors import UserError
from models.names import PROBABILITIES, SERVING_DEFAULT
from models.serving import tf_serving
from models.serving.precision import ServingPrecision, apply_precision
from models.serving.signatures import TEXT_INPUT, TEXT_PAIR_INPUT
from models.serving.tf_serving import WARMUP_TEXTS, BadRequestError


@dataclasses.dataclass(frozen=True)
class Prediction:
    text: str
    label: str
    label_id: int
    confidence: float
    probabilities: tuple[float, ...]
    text_pair: str | None = None
    labels: tuple[str, ...] | None = None  # multi-label models: every label at or over its threshold


class NoServableModel(UserError, FileNotFoundError):
    """The folder given to serve or score holds no complete SavedModel version."""


def resolve_version_dir(path: str | Path) -> Path:
    """A local version folder itself, or the newest complete version under a TF Serving model base path."""
    return Path(newest_complete_version(str(path)))


def newest_complete_version(path: str) -> str:
    """A version folder itself, or the newest numbered version under a TF Serving model base path that holds
    its saved_model.pb, local or in a bucket (TF's filesystems). A push writes saved_model.pb last, so a version
    without it is a push in flight or cut off: never served, never copied."""
    path = path.rstrip("/") or "/"
    if tf.io.gfile.exists(f"{path}/saved_model.pb"):
        return path
    names = [name.rstrip("/") for name in tf.io.gfile.listdir(path)] if tf.io.gfile.isdir(path) else []
    numbered = sorted((name for name in names if name.isdigit()), key=int, reverse=True)
    for name in numbered:
        if tf.io.gfile.exists(f"{path}/{name}/saved_model.pb"):
            return f"{path}/{name}"
    if numbered:
        raise NoServableModel(
            f"{path} holds version folders {sorted(numbered, key=int)} but none with its saved_model.pb: a push in "
            "flight or cut off; serve once a push finishes"
        )
    raise NoServableModel(
        f"{path} holds no SavedModel (saved_model.pb) and no numbered TF Serving version folders: give the pushed "
        "model's folder (serving_dir/<model name>, as `make run` prints it) or one version folder inside it"
    )


def load_serving_model(path: str | Path):
    version_dir = resolve_version_dir(path)
    return version_dir, tf.saved_model.load(str(version_dir))


def at_precision(model, choice: ServingPrecision) -> ServingPrecision:
    """The precision `model` answers in from now on: `choice`, if in bf16 its answers to the warm-up texts stay
    those of fp32 (models/serving/precision.py), else fp32 with the reason."""
    texts = list(WARMUP_TEXTS)
    pairs = texts if len(tf_serving.text_inputs(model)) == 2 else None
    return apply_precision(choice, lambda: [p.probabilities for p in predict_texts(model, texts, pairs)])


def predict_texts(model, texts: Sequence[str], text_pairs: Sequence[str] | None = None) -> list[Prediction]:
    """The serving_default answer per text (or per pair, for a sentence-pair model)."""
    if not texts:
        return []
    inputs = {TEXT_INPUT: tf.constant(list(texts))}
    if text_pairs is not None:
        inputs[TEXT_PAIR_INPUT] = tf.constant(list(text_pairs))
    outputs = model.signatures[SERVING_DEFAULT](**inputs)
    pairs = list(text_pairs) if text_pairs is not None else [None] * len(texts)
    if "labels" in outputs:  # a multi-label model
        return [
            Prediction(text, ", ".join(chosen), -1, max(probabilities, default=0.0), probabilities, pair, chosen)
            for text, pair, chosen, probabilities in zip(
                texts,
                pairs,
                [tuple(v.decode("utf-8") for v in row if v) for row in outputs["labels"].numpy()],
                [tuple(float(p) for p in row) for row in outputs[PROBABILITIES].numpy()],
                strict=True,
            )
        ]
    labels = [v.decode("utf-8") for v in outputs["label"].numpy()]
    return [
        Prediction(text, label, int(label_id), float(confidence), tuple(float(p) for p in probabilities), pair)
        for text, pair, label, label_id, confidence, probabilities in zip(
            texts,
            pairs,
            labels,
            outputs["label_id"].numpy(),
            outputs["confidence"].numpy(),
            outputs[PROBABILITIES].numpy(),
            strict=True,
        )
    ]


def split_pairs(texts: Sequence[str], separator: str, model_dir: str | Path) -> tuple[list[str], list[str]]:
    """'TEXT<separator>TEXT_PAIR' lines as the two inputs of a sentence-pair model."""
    split = [text.split(separator, 1) for text in texts]
    if any(len(parts) != 2 for parts in split):
        raise BadRequestError(
            f"{model_dir} classifies sentence pairs: give each as 'TEXT{separator!r}TEXT_PAIR' "
            "(or set --pair-separator)"
        )
    return [a for a, _ in split], [b for _, b in split]


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def prediction_lines(predictions: Sequence[Prediction]) -> list[str]:
    """One line per prediction, as `hftfx predict` prints them: label, confidence, probabilities, the text."""
    width = max((len(p.label) for p in predictions), default=0) + 1
    lines = []
    for prediction in predictions:
        if prediction.text_pair is None:
            shown = _shorten(prediction.text, 70)
        else:
            shown = _shorten(prediction.text, 34) + "  |  " + _shorten(prediction.text_pair, 34)
        probabilities = "  ".join(f"{p:.2f}" for p in prediction.probabilities)
        if prediction.labels is not None:  # multi-label: the labels answered, no single confidence
            lines.append(f"  {prediction.label or '(no label)':<{width}}  [{probabilities}]  {shown}")
            continue
        lines.append(f"  {prediction.label:<{width}} {prediction.confidence:6.1%}  [{probabilities}]  {shown}")
    return lines
