"""The Hugging Face export read the way a transformers user reads it, beside the SavedModel.

`hf_probabilities` runs AutoTokenizer + AutoModelForSequenceClassification (`from_pretrained` on the exported
folder) in transformers 5 + PyTorch, the reference environment (bin/reference-env), which has nothing of this
project; `serving_probabilities` asks the pushed SavedModel's serving_default. Texts of every length bucket:
short, mid-length and over max_seq_length.
"""

from __future__ import annotations

import numpy as np

from tests import torch_reference_env as reference

# Short (under 16 tokens), mid-length (17-32) and truncated (over 32) texts, as the tiny runs' buckets are.
BUCKET_TEXTS = [
    "a gem.",
    "dull, flat and far too long for what it has to say about anything at all.",
    "the film is a sprawling, ambitious, often gorgeous mess whose actors seem lost, whose plot forgets "
    "itself halfway, and whose final act, for all its noise, lands with a thud that no score can lift. " * 2,
    "",
]
PAIR_TEXTS = [
    "a short synopsis.",
    "Three blind men rob a bank in a city that never sleeps, and the police " * 3,
    "x",
    "",
]


def hf_probabilities(folder: str, texts: list[str], pairs: list[str] | None = None) -> tuple[np.ndarray, dict]:
    """The export's probabilities as a transformers user gets them today: AutoTokenizer and
    AutoModelForSequenceClassification (`from_pretrained` on the folder) in transformers 5 + PyTorch, a process
    and an environment of their own (tests/torch_reference.py); no weight may be missing, unused or of another
    shape."""
    answer = reference.on_texts(folder, texts, pairs)
    assert answer["loading"] == {"missing_keys": [], "unexpected_keys": [], "mismatched_keys": []}
    return np.array(answer["probabilities"]), answer["labels"]


def serving_probabilities(
    version_dir: str, texts: list[str], pairs: list[str] | None = None, head_bias_change: float = 0.0
) -> np.ndarray:
    """serving_default's probabilities; with `head_bias_change`, those of a model whose classifier bias for the
    first label is that much higher (one weight changed, in memory): what a scorer of another model would give."""
    from models.serving.pushed_model import load_serving_model, predict_texts

    _, model = load_serving_model(version_dir)
    if head_bias_change:
        (bias,) = [v for v in model.signatures["serving_default"].variables if v.name.endswith("classifier/bias:0")]
        bias.assign(bias + np.eye(bias.shape[0], dtype=np.float32)[0] * head_bias_change)
    return np.array([p.probabilities for p in predict_texts(model, texts, pairs)])


def hf_window_probabilities(folder: str, texts: list[str], overlap: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The mean of softmax probabilities over each text's first `count` windows, as a transformers user computes
    it: the export's tokenizer with `return_overflowing_tokens` (`overlap` tokens shared by neighbours, its own
    model_max_length wide) and its model, in transformers 5 + PyTorch; and each text's first window's
    probabilities."""
    answer = reference.on_texts(folder, texts, windows={"overlap": overlap, "count": count})
    return np.array(answer["probabilities"]), np.array(answer["first"])
