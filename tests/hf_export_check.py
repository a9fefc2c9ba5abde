"""The Hugging Face export read the way a transformers user reads it, in a fresh process, beside the SavedModel.

`hf_probabilities` runs AutoTokenizer + TFAutoModelForSequenceClassification (`from_pretrained` on the
exported folder) in a new interpreter that imports nothing of this project, and the same with the weights of the
PyTorch-layout model.safetensors read by transformers' own PT->TF loader (no key may be missing or left over, the
probabilities must be the h5's); `serving_probabilities` asks the pushed SavedModel's serving_default. Texts of
every length bucket: short, mid-length and over max_seq_length.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

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

_SCRIPT = """
import json, sys
import tensorflow as tf
from safetensors.numpy import load_file
from transformers import AutoConfig, AutoTokenizer, TFAutoModelForSequenceClassification
from transformers.modeling_tf_pytorch_utils import load_pytorch_state_dict_in_tf2_model

folder, texts, pairs = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
tokenizer = AutoTokenizer.from_pretrained(folder)
model = TFAutoModelForSequenceClassification.from_pretrained(folder, use_safetensors=False)  # transformers#40028
inputs = tokenizer(texts, pairs, truncation=True, padding=True, return_tensors="tf")
multi = AutoConfig.from_pretrained(folder).problem_type == "multi_label_classification"
activation = tf.sigmoid if multi else tf.nn.softmax
probabilities = activation(model(**inputs).logits)
pt_model = TFAutoModelForSequenceClassification.from_config(AutoConfig.from_pretrained(folder))
_, info = load_pytorch_state_dict_in_tf2_model(
    pt_model, load_file(folder + "/model.safetensors"), allow_missing_keys=True, output_loading_info=True
)
print(json.dumps({
    "probabilities": probabilities.numpy().tolist(),
    "id2label": model.config.id2label,
    "pytorch_layout": activation(pt_model(**inputs).logits).numpy().tolist(),
    "pytorch_keys": {k: info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")},
}))
"""


def hf_probabilities(folder: str, texts: list[str], pairs: list[str] | None = None) -> tuple[np.ndarray, dict]:
    env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run(
        [sys.executable, "-c", _SCRIPT, folder, json.dumps(texts), json.dumps(pairs)],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",  # nothing of this project on the path
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["pytorch_keys"] == {"missing_keys": [], "unexpected_keys": [], "mismatched_keys": []}
    np.testing.assert_allclose(answer["pytorch_layout"], answer["probabilities"], rtol=0, atol=1e-6)
    return np.array(answer["probabilities"]), answer["id2label"]


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


_WINDOWS_SCRIPT = """
import json, sys
import numpy as np
import tensorflow as tf
from transformers import AutoTokenizer, TFAutoModelForSequenceClassification

folder, texts, overlap, count = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
tokenizer = AutoTokenizer.from_pretrained(folder)
model = TFAutoModelForSequenceClassification.from_pretrained(folder, use_safetensors=False)  # transformers#40028
inputs = tokenizer(texts, truncation=True, stride=overlap, return_overflowing_tokens=True, padding=True)
document = inputs.pop("overflow_to_sample_mapping")
logits = model({k: tf.constant(v) for k, v in inputs.items()}).logits
probabilities = tf.nn.softmax(logits).numpy()
windows = [[p for p, d in zip(probabilities, document) if d == i][:count] for i in range(len(texts))]
answers = [np.mean(w, axis=0).tolist() for w in windows]
print(json.dumps({"mean": answers, "first": [w[0].tolist() for w in windows]}))
"""


def hf_window_probabilities(folder: str, texts: list[str], overlap: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The mean of softmax probabilities over each text's first `count` windows, as a transformers user computes
    it: the export's tokenizer with `return_overflowing_tokens` (`overlap` tokens shared by neighbours, its own
    model_max_length wide) and its TF model, in a fresh process that imports nothing of this project; and each
    text's first window's probabilities."""
    env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run(
        [sys.executable, "-c", _WINDOWS_SCRIPT, folder, json.dumps(texts), str(overlap), str(count)],
        capture_output=True, text=True, env=env, cwd="/", timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    return np.array(answer["mean"]), np.array(answer["first"])
