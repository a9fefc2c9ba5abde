"""A sequence classifier of our own for every ported architecture: build it from config.json, load a checkpoint's
PyTorch-named tensors into it, and give them back in the same names for the Hugging Face export.

The model answers logits (float32 under mixed precision) for a dict of the tokenizer's inputs. Which weights may
start fresh is the head's business: a `...ForSequenceClassification` checkpoint brings its head (and scores as it
did), a bare encoder or a masked-LM checkpoint gets a new one, and any encoder weight the checkpoint lacks is an error.
"""

from __future__ import annotations

import dataclasses
import json
import types
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf
import tf_keras

from models.encoders import bert_family, deberta_v2, modernbert
from models.encoders.layers import TorchParam, UnsupportedConfigError, activation
from models.errors import UserError

# model_type -> (module computing it, transformers' sequence-classification class it stands for)
ARCHITECTURES = {
    **{kind: (bert_family, flavor.classifier) for kind, flavor in bert_family.FLAVORS.items()},
    "deberta-v2": (deberta_v2, "DebertaV2ForSequenceClassification"),
    "modernbert": (modernbert, "ModernBertForSequenceClassification"),
}
PORTED_FAMILIES = (
    "BERT/MiniLM, RoBERTa, XLM-R, CamemBERT, ELECTRA, DistilBERT, ALBERT, MPNet, DeBERTa-v2/v3, ModernBERT"
)
_LAYER_NORM_RENAMES = {".gamma": ".weight", ".beta": ".bias"}  # checkpoints older than PyTorch's names


class CheckpointError(UserError, ValueError):
    """The checkpoint's tensors do not fit the architecture config.json declares; the message says which."""


@dataclasses.dataclass(frozen=True)
class LoadResult:
    loaded: int
    new: tuple[str, ...]  # head weights the checkpoint lacks (or holds for another label count)
    unused: tuple[str, ...]  # checkpoint tensors no weight of ours reads (position-id buffers, a masked-LM head)


def is_ported(model_type: str | None) -> bool:
    return model_type in ARCHITECTURES


def module_for(config: dict):
    return ARCHITECTURES[config.get("model_type")][0]


def position_limit(config: dict) -> int:
    return module_for(config).position_limit(config)


def check_config(config: dict) -> None:
    """Raises UnsupportedConfigError where config.json asks for something our encoder does not compute."""
    sizes = module_for(config).Sizes.of(config)
    for name in ("activation", "classifier_activation", "pooler_activation"):  # each family has those it has
        if hasattr(sizes, name):
            activation(getattr(sizes, name))


def describe(config: dict) -> str:
    """What the encoder computes that bears on the task: its positions, ModernBERT's window and pooling."""
    module = module_for(config)
    sizes = module.Sizes.of(config)
    text = f"{sizes.layers} layers, hidden {sizes.hidden}, {module.position_limit(config):,} positions"
    if module is deberta_v2 and sizes.relative_attention:
        buckets = f", log-bucketed into {sizes.span} each side" if sizes.position_buckets > 0 else ""
        text += f", disentangled attention ({'+'.join(sizes.pos_att_type)}) over relative positions{buckets}"
    if module is modernbert:
        local = sum(kind == modernbert.SLIDING for kind in sizes.layer_types)
        text += (
            f", local attention over {2 * sizes.half_window} tokens in {local} of {sizes.layers} layers (global in "
            f"the rest), rotary thetas {sizes.thetas[modernbert.FULL]:,.0f} / {sizes.thetas[modernbert.SLIDING]:,.0f}, "
            f"{sizes.pooling} pooling"
        )
    return text


class SequenceClassifier(tf_keras.Model):
    """Encoder + the family's head; `config` reads as a transformers config does (getattr), for the FLOP count and
    the recipe."""

    def __init__(self, config: dict, label_names: Sequence[str], multi_label: bool = False, **kwargs):
        super().__init__(**kwargs)
        module, class_name = ARCHITECTURES[config["model_type"]]
        hf_config = {
            **config,
            "architectures": [class_name],
            "id2label": {str(i): name for i, name in enumerate(label_names)},
            "label2id": {name: i for i, name in enumerate(label_names)},
            # transformers' own name for a sigmoid per label (what its PyTorch heads and pipelines read back).
            "problem_type": "multi_label_classification" if multi_label else "single_label_classification",
        }
        hf_config.pop("num_labels", None)  # id2label says it; transformers refuses the two disagreeing
        hf_config.pop("torch_dtype", None)  # transformers 4's name for the weights' dtype
        hf_config["dtype"] = "float32"  # what we write, whatever the checkpoint held (bf16 ones are common)
        # As JSON: Keras would track a dict attribute as a wrapper that json cannot write.
        self._hf_config_json = json.dumps(hf_config, sort_keys=True)
        self.config = types.SimpleNamespace(**hf_config, num_labels=len(label_names))
        self.label_names, self.multi_label = list(label_names), multi_label
        self.encoder = module.Encoder(config, name="encoder")
        self.head = module.Head(config, len(label_names), name="head")

    @property
    def hf_config(self) -> dict:
        """config.json as transformers 5 reads it back: the checkpoint's, with the task's labels and class."""
        return json.loads(self._hf_config_json)

    def call(self, inputs, training=False):
        hidden = self.encoder(inputs, training=training)
        return tf.cast(self.head(hidden, inputs["attention_mask"], training=training), tf.float32)

    def build_weights(self) -> None:
        """Creates every variable by one call on a small batch."""
        ids = tf.constant([[1, 2, 3, 0], [1, 2, 0, 0]], tf.int32)
        self({"input_ids": ids, "attention_mask": tf.cast(ids > 0, tf.int32)}, training=False)

    def get_input_embeddings(self) -> tf_keras.layers.Layer:
        return self.encoder.input_embeddings()

    def torch_params(self) -> list[TorchParam]:
        return [*self.encoder.torch_params(), *self.head.torch_params()]

    def head_names(self) -> set[str]:
        return {param.name for param in self.head.torch_params()}

    def fresh_copy(self) -> SequenceClassifier:
        """The same architecture and labels, never trained (see models/hub/pretrained.py: weights_only_copy)."""
        dropped = ("architectures", "id2label", "label2id", "dtype")
        config = {k: v for k, v in self.hf_config.items() if k not in dropped}
        copy = SequenceClassifier(config, self.label_names, self.multi_label)
        copy.build_weights()
        return copy


def build(config: dict, label_names: Sequence[str], multi_label: bool = False) -> SequenceClassifier:
    try:
        model = SequenceClassifier(config, label_names, multi_label)
    except (KeyError, TypeError) as error:
        raise UnsupportedConfigError(f"config.json lacks or misstates {error}") from error
    model.build_weights()
    return model


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The checkpoint's tensors as float32 numpy arrays; bfloat16 and float16 checkpoints (common for recent
    encoders) read through TensorFlow's dtypes, which numpy lacks."""
    from safetensors.tensorflow import load_file

    return {name: tensor.numpy().astype(np.float32) if tensor.dtype.is_floating else tensor.numpy()
            for name, tensor in load_file(str(path)).items()}  # fmt: skip


def load(model: SequenceClassifier, state: dict[str, np.ndarray]) -> LoadResult:
    """Assigns the checkpoint's tensors to the model's weights by PyTorch name."""
    state = _canonical_names(state, model)
    params = model.torch_params()
    head = model.head_names()
    new, missing_encoder, mismatched = [], [], []
    for param in params:
        value = state.get(param.name)
        expected = tuple(param.variable.shape)
        if value is not None and param.transpose:
            value = value.T
        if value is None or value.shape != expected:
            if param.name in head:
                new.append(param.name)
            elif value is None:
                missing_encoder.append(param.name)
            else:
                mismatched.append(f"{param.name}: checkpoint {value.shape[::-1] if param.transpose else value.shape}")
            continue
        param.variable.assign(value.astype(param.variable.dtype.as_numpy_dtype))
    if missing_encoder or mismatched:
        raise CheckpointError(
            f"the checkpoint does not match config.json's architecture: missing {missing_encoder[:8]} "
            f"({len(missing_encoder)} in all), other shapes {mismatched[:4]}"
        )
    used = {param.name for param in params}
    return LoadResult(loaded=len(params) - len(new), new=tuple(new), unused=tuple(sorted(set(state) - used)))


def torch_state(model: SequenceClassifier) -> dict[str, np.ndarray]:
    """The model's weights in PyTorch's names and layouts (nn.Linear weights [out, in])."""
    return {
        param.name: np.ascontiguousarray(param.variable.numpy().T if param.transpose else param.variable.numpy())
        for param in model.torch_params()
    }


def _canonical_names(state: dict[str, np.ndarray], model: SequenceClassifier) -> dict[str, np.ndarray]:
    """A bare encoder checkpoint (BertModel, ModernBertModel) names its tensors without the task model's prefix;
    old BERT checkpoints name LayerNorm's gamma and beta. transformers renames both when it loads; so do we."""
    prefix = next(iter(model.encoder.torch_params())).name.split(".")[0]
    if not any(name.startswith(f"{prefix}.") for name in state):
        state = {f"{prefix}.{name}": value for name, value in state.items()}
    renamed = {}
    for name, value in state.items():
        for old, new in _LAYER_NORM_RENAMES.items():
            if name.endswith(old) and "LayerNorm" in name:
                name = name.removesuffix(old) + new
        renamed[name] = value
    return renamed
