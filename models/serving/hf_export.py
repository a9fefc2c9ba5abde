"""The fine-tuned classifier in the Hugging Face layout: what `from_pretrained` and `pipeline()` load.

`model.safetensors` holds our encoder's weights in PyTorch's names and layouts (`format: pt`), beside the
config.json transformers 5 expects (the architecture's class, id2label / label2id / problem_type) and the base
model's tokenizer with `model_max_length` set to the length the SavedModel truncates to, so that
`tokenizer(texts, truncation=True)` gives the ids the serving graph gives (both truncate `longest_first`).
No tf_model.h5: no TensorFlow class of transformers computes our encoders (transformers 5 has no TensorFlow);
TensorFlow users serve the SavedModel.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

HF_FORMAT_DIR = "Format-HF"  # beside TFX's Format-Serving in the Trainer's model artifact
PT_WEIGHTS = "model.safetensors"  # PyTorch names and layouts: what transformers 5 and PyTorch users load
HF_CONFIG = "config.json"


def hf_format_dir(serving_model_dir: str) -> str:
    """Where the Trainer writes the HF export: a sibling of the SavedModel inside the same model artifact."""
    return os.path.join(os.path.dirname(serving_model_dir.rstrip("/")), HF_FORMAT_DIR)


def save_hf_format(model, tokenizer_dir: str | Path, max_seq_length: int, destination: str) -> list[str]:
    """Writes the model and its tokenizer to `destination` (a local path or any tf.io.gfile URL, e.g. gs://);
    returns the file names written. `model` must not track an optimizer (see from_folder.weights_only_copy)."""
    from models.encoders.classifier import pools_unlike_transformers
    from models.serving import sentence_transformers_export as sentence_transformers
    from models.serving.tokenizer_export import check_read_back, save_tokenizer

    with tempfile.TemporaryDirectory(prefix="hf-export-") as local:
        if pools_unlike_transformers(model.hf_config):
            sentence_transformers.save_layout(model, Path(local), max_seq_length)
        else:
            Path(local, HF_CONFIG).write_text(json.dumps(model.hf_config, indent=2, sort_keys=True) + "\n")
            save_pytorch_weights(model, os.path.join(local, PT_WEIGHTS))
        save_tokenizer(tokenizer_dir, max_seq_length, local)
        check_read_back(tokenizer_dir, local)  # here, not at the publisher after the Evaluator
        names = sorted(os.listdir(local))
        _copy_tree(local, destination)
    return names


def save_pytorch_weights(model, path: str) -> None:
    """The weights in PyTorch names as safetensors, with the `format: pt` metadata transformers' loaders check."""
    from safetensors.numpy import save_file

    from models.encoders.classifier import torch_state

    save_file(torch_state(model), path, metadata={"format": "pt"})


def _copy_tree(source: str, destination: str) -> None:
    if "://" not in destination:
        shutil.copytree(source, destination, dirs_exist_ok=True)
        return
    import tensorflow as tf  # object stores (gs://) through TF's filesystems, as every other artifact

    for folder, _, files in os.walk(source):
        relative = os.path.relpath(folder, source)
        target = destination.rstrip("/") + ("" if relative == "." else f"/{relative}")
        tf.io.gfile.makedirs(target)
        for name in files:
            tf.io.gfile.copy(os.path.join(folder, name), f"{target}/{name}", overwrite=True)
