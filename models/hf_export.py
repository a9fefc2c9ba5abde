"""The fine-tuned classifier in the Hugging Face layout: what `from_pretrained` and `pipeline()` load.

`save_pretrained` of the TF model (config.json with id2label / label2id / problem_type, tf_model.h5) and of
the base model's tokenizer, with `model_max_length` set to the length the SavedModel truncates to, so that
`tokenizer(texts, truncation=True)` gives the ids the serving graph gives (both truncate `longest_first`).
Weights are written as tf_model.h5: transformers 4.57's TF loader fails on safetensors (models/pretrained.py).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

HF_FORMAT_DIR = "Format-HF"  # beside TFX's Format-Serving in the Trainer's model artifact
HF_WEIGHTS = "tf_model.h5"
HF_CONFIG = "config.json"


def hf_format_dir(serving_model_dir: str) -> str:
    """Where the Trainer writes the HF export: a sibling of the SavedModel inside the same model artifact."""
    return os.path.join(os.path.dirname(serving_model_dir.rstrip("/")), HF_FORMAT_DIR)


def save_hf_format(model, tokenizer_dir: str | Path, max_seq_length: int, destination: str) -> list[str]:
    """Writes the model and its tokenizer to `destination` (a local path or any tf.io.gfile URL, e.g. gs://);
    returns the file names written. `model` must not track an optimizer (see pretrained.weights_only_copy)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, model_max_length=max_seq_length)
    with tempfile.TemporaryDirectory(prefix="hf-export-") as local:
        model.save_pretrained(local)
        tokenizer.save_pretrained(local)
        names = sorted(os.listdir(local))
        _copy_tree(local, destination)
    return names


def _copy_tree(source: str, destination: str) -> None:
    if "://" not in destination:
        shutil.copytree(source, destination, dirs_exist_ok=True)
        return
    import tensorflow as tf  # object stores (gs://) through TF's filesystems, as every other artifact

    for name in os.listdir(source):
        tf.io.gfile.makedirs(destination)
        tf.io.gfile.copy(os.path.join(source, name), f"{destination.rstrip('/')}/{name}", overwrite=True)
