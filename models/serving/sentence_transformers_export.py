"""A classifier whose head no transformers class computes, in the sentence-transformers layout.

BERT's family pooling the mean of the tokens (model.pooling: mean, or auto on a sentence-transformers checkpoint
that pools so) has no `...ForSequenceClassification` in transformers: those pool the first token, and would give
other logits from the same weights without a word. So the export is what sentence-transformers loads: the encoder as
the family's bare model (`BertModel`, model.safetensors), the mean pooling (1_Pooling), then the head's two dense
layers (2_Dense with the head's activation, 3_Dense giving the logits). `SentenceTransformer(folder).encode(texts)`
answers the logits; config.json keeps id2label for their names.
"""

from __future__ import annotations

import json
from pathlib import Path

from models.hub.sentence_transformers import (
    CONFIG_FILE,
    DENSE,
    MODULES_FILE,
    POOLING,
    POOLING_DIR,
    TRANSFORMER,
    WEIGHTS_FILE,
)

# our activation names -> the torch.nn module sentence-transformers' Dense builds from its config
_TORCH_ACTIVATIONS = {
    "tanh": "torch.nn.modules.activation.Tanh",
    "relu": "torch.nn.modules.activation.ReLU",
    "gelu": "torch.nn.modules.activation.GELU",
    None: "torch.nn.modules.linear.Identity",
}


def save_layout(model, local: Path, max_seq_length: int) -> None:
    """Writes the encoder, the pooling and the head's dense layers into `local` (the tokenizer is the caller's)."""
    from safetensors.numpy import save_file

    from models.encoders.classifier import bare_class, torch_state

    head = model.head
    prefix, hidden = head.flavor.prefix, model.hf_config.get("hidden_size") or model.hf_config["dim"]
    config = {**model.hf_config, "architectures": [bare_class(model.hf_config)]}
    (local / CONFIG_FILE).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    state = torch_state(model)
    bare = {name.removeprefix(f"{prefix}."): value for name, value in state.items() if name.startswith(f"{prefix}.")}
    save_file(bare, str(local / WEIGHTS_FILE), metadata={"format": "pt"})
    _write_json(local / "sentence_bert_config.json", {"max_seq_length": max_seq_length, "do_lower_case": False})
    _write_json(local / POOLING_DIR / CONFIG_FILE, {
        "word_embedding_dimension": hidden, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
    })  # fmt: skip
    entries = [("", TRANSFORMER), (POOLING_DIR, POOLING)]
    inner_weight, inner_bias, out_weight, out_bias = (p.name for p in head.torch_params())
    for index, (weight, bias, act) in enumerate(
        [(inner_weight, inner_bias, head.activation_name), (out_weight, out_bias, None)], start=2
    ):
        folder = f"{index}_Dense"
        _write_json(local / folder / CONFIG_FILE, {
            "in_features": int(state[weight].shape[1]), "out_features": int(state[weight].shape[0]), "bias": True,
            "activation_function": _TORCH_ACTIVATIONS[act],
        })  # fmt: skip
        save_file({"linear.weight": state[weight], "linear.bias": state[bias]}, str(local / folder / WEIGHTS_FILE))
        entries.append((folder, DENSE))
    modules = [{"idx": i, "name": str(i), "path": path, "type": kind} for i, (path, kind) in enumerate(entries)]
    _write_json(local / MODULES_FILE, modules)


def _write_json(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n")
