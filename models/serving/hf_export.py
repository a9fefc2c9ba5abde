"""The fine-tuned classifier in the Hugging Face layout: what `from_pretrained` and `pipeline()` load.

`save_pretrained` of the TF model (config.json with id2label / label2id / problem_type, tf_model.h5) and of
the base model's tokenizer, with `model_max_length` set to the length the SavedModel truncates to, so that
`tokenizer(texts, truncation=True)` gives the ids the serving graph gives (both truncate `longest_first`).

The same weights also go to `model.safetensors` in PyTorch's names and layouts (`format: pt`): what PyTorch,
transformers 5 (which has no TensorFlow) and `pipeline("text-classification")` load. transformers 4's TF
`save_pretrained(safe_serialization=True)` would write TF names with `format: tf`, which only a TensorFlow install
converts. The names and transposes are transformers' own TF<->PT rules (modeling_tf_pytorch_utils), the ones its
PT->TF loader inverts. With both files in one folder transformers 4's TF loader picks the safetensors and fails on
safetensors >= 0.6 (transformers#40028, not to be fixed: TF is deprecated): TF users pass `use_safetensors=False`.

A model of our own encoders (models/encoders) is written from its own weights, already in PyTorch names, with the
config.json transformers 5 expects; no tf_model.h5, since no TensorFlow class of transformers computes it (none
exists for ModernBERT, and transformers 5 has no TensorFlow at all).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

HF_FORMAT_DIR = "Format-HF"  # beside TFX's Format-Serving in the Trainer's model artifact
HF_WEIGHTS = "tf_model.h5"
PT_WEIGHTS = "model.safetensors"  # PyTorch names and layouts: what transformers 5 and PyTorch users load
HF_CONFIG = "config.json"


def hf_format_dir(serving_model_dir: str) -> str:
    """Where the Trainer writes the HF export: a sibling of the SavedModel inside the same model artifact."""
    return os.path.join(os.path.dirname(serving_model_dir.rstrip("/")), HF_FORMAT_DIR)


def save_hf_format(model, tokenizer_dir: str | Path, max_seq_length: int, destination: str) -> list[str]:
    """Writes the model and its tokenizer to `destination` (a local path or any tf.io.gfile URL, e.g. gs://);
    returns the file names written. `model` must not track an optimizer (see pretrained.weights_only_copy)."""
    from models.tokenizers.tokenizer import load_hf_tokenizer

    tokenizer = load_hf_tokenizer(tokenizer_dir, model_max_length=max_seq_length)
    with tempfile.TemporaryDirectory(prefix="hf-export-") as local:
        if is_own_encoder(model):
            Path(local, HF_CONFIG).write_text(json.dumps(model.hf_config, indent=2, sort_keys=True) + "\n")
        else:
            model.save_pretrained(local)
        save_pytorch_weights(model, os.path.join(local, PT_WEIGHTS))
        tokenizer.save_pretrained(local)
        names = sorted(os.listdir(local))
        _copy_tree(local, destination)
    return names


def is_own_encoder(model) -> bool:
    from models.encoders.classifier import SequenceClassifier

    return isinstance(model, SequenceClassifier)


def pytorch_state_dict(model) -> dict:
    """The TF classifier's weights as a PyTorch state dict of numpy arrays: our encoders' in the names they declare;
    a transformers TF model's renamed and transposed by transformers' own TF->PT rules (dense kernels transposed,
    `layer_._0` -> `layer.0`, the Keras model's own scope dropped, so the encoder sits under its PyTorch prefix:
    `bert.`, `roberta.`, ...)."""
    if is_own_encoder(model):
        from models.encoders.classifier import torch_state

        return torch_state(model)
    from models.hub.pretrained import legacy_pytorch_state

    return legacy_pytorch_state(model)


def save_pytorch_weights(model, path: str) -> None:
    """pytorch_state_dict as safetensors with the `format: pt` metadata transformers' loaders check."""
    from safetensors.numpy import save_file

    save_file(pytorch_state_dict(model), path, metadata={"format": "pt"})


def _copy_tree(source: str, destination: str) -> None:
    if "://" not in destination:
        shutil.copytree(source, destination, dirs_exist_ok=True)
        return
    import tensorflow as tf  # object stores (gs://) through TF's filesystems, as every other artifact

    for name in os.listdir(source):
        tf.io.gfile.makedirs(destination)
        tf.io.gfile.copy(os.path.join(source, name), f"{destination.rstrip('/')}/{name}", overwrite=True)
