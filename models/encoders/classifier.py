"""A sequence classifier of our own for every ported architecture: build it from config.json, load a checkpoint's
PyTorch-named tensors into it, and give them back in the same names for the Hugging Face export.

The model answers logits (float32 under mixed precision) for a dict of the tokenizer's inputs. Which weights may
start fresh is the head's business: a `...ForSequenceClassification` checkpoint brings its head (and scores as it
did), a bare encoder or a masked-LM checkpoint gets a new one, and any encoder weight the checkpoint lacks is an error.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf
import tf_keras

from models.encoders import (
    bert_family,
    checkpoint_file,
    deberta_v2,
    eurobert,
    gte,
    jina_v3,
    modernbert,
    nomic_bert,
    packed_rows,
    ultrabert,
)
from models.encoders.activations import activation
from models.encoders.layers import TorchParam, UnsupportedConfigError, bound_width, masked_mean
from models.errors import UserError
from models.hardware.flops import EncoderShape

# model_type -> (module computing it, transformers' sequence-classification class it stands for)
ARCHITECTURES = {
    **{kind: (bert_family, flavor.classifier) for kind, flavor in bert_family.FLAVORS.items()},
    "deberta-v2": (deberta_v2, "DebertaV2ForSequenceClassification"),
    "modernbert": (modernbert, "ModernBertForSequenceClassification"),
    "gte": (gte, "GteForSequenceClassification"),
    "eurobert": (eurobert, "EuroBertForSequenceClassification"),
    "nomic_bert": (nomic_bert, "NomicBertForSequenceClassification"),
    "jina_embeddings_v3": (jina_v3, "JinaEmbeddingsV3ForSequenceClassification"),
    "ultrabert": (ultrabert, "UltrabertForSequenceClassification"),
}
PORTED_FAMILIES = (
    "BERT/MiniLM, RoBERTa, XLM-R, CamemBERT, ELECTRA, DistilBERT, ALBERT, MPNet, DeBERTa-v2/v3, ModernBERT (Ettin, "
    "mmBERT), GTE, EuroBERT, NomicBERT, Jina embeddings v3, UltraBERT"
)
_LAYER_NORM_RENAMES = {".gamma": ".weight", ".beta": ".bias"}  # checkpoints older than PyTorch's names
# encoder prefix -> the other prefixes checkpoints of that family carry (each module's OTHER_PREFIXES)
_OTHER_PREFIXES = {module.PREFIX: module.OTHER_PREFIXES for module, _ in ARCHITECTURES.values()
                   if module.OTHER_PREFIXES}  # fmt: skip


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


# The sizes our encoders take: above every encoder released (mmBERT's 256k vocabulary, ModernBERT's 8,192 positions,
# xxlarge widths) and below what no machine could build; a config past them is refused before anything is allocated.
SIZE_MAXIMA = {
    "vocab": 2_000_000, "hidden": 16_384, "intermediate": 131_072, "layers": 256, "heads": 256, "positions": 1_048_576,
}  # fmt: skip


def check_config(config: dict) -> None:
    """Raises UnsupportedConfigError where config.json asks for something our encoder does not compute, or for sizes
    out of range (not positive, past SIZE_MAXIMA, heads not dividing the width)."""
    sizes = module_for(config).Sizes.of(config)
    for name, maximum in SIZE_MAXIMA.items():
        value = getattr(sizes, name)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
            raise UnsupportedConfigError(f"{name} size {value!r} (our encoders take 1 to {maximum:,})")
    if sizes.hidden % sizes.heads:
        raise UnsupportedConfigError(f"hidden size {sizes.hidden}, which {sizes.heads} attention heads do not divide")
    for name in sizes.activations:
        activation(name)


def encoder_shape(config: dict, num_labels: int, embeddings_trained: bool = True) -> EncoderShape:
    """The encoder as the FLOP count and the recipe read it, from its family's own sizes (the family knows the names
    its config.json uses)."""
    module = module_for(config)
    sizes = module.Sizes.of(config)
    return EncoderShape(
        layers=sizes.layers, hidden=sizes.hidden, intermediate=sizes.intermediate, heads=sizes.heads,
        num_labels=num_labels, embeddings_trained=embeddings_trained,
        feed_forward_matrices=module.FEED_FORWARD_MATRICES, vocab=sizes.vocab,
    )  # fmt: skip


def describe(config: dict) -> str:
    """What the encoder computes that bears on the task: its positions, then what its family says of itself (its
    module's describe: ModernBERT's window, DeBERTa's relative positions, rotary thetas, pooling)."""
    module = module_for(config)
    sizes = module.Sizes.of(config)
    text = f"{sizes.layers} layers, hidden {sizes.hidden}, {module.position_limit(config):,} positions"
    return text + module.describe(sizes)


def pools_unlike_transformers(config: dict) -> bool:
    """Whether the head pools as no transformers class of its family does: BERT's family on the mean of the tokens
    (its classes pool the first token; ModernBERT's, EuroBERT's and UltraBERT's read classifier_pooling themselves).
    Such a model is exported in the sentence-transformers layout (models/serving/sentence_transformers_export.py)."""
    return module_for(config) is bert_family and config.get("classifier_pooling") == "mean"


def bare_class(config: dict) -> str:
    """transformers' bare encoder class of the model's family (BertModel beside BertForSequenceClassification)."""
    return ARCHITECTURES[config["model_type"]][1].replace("ForSequenceClassification", "Model")


def warmup_ratio(model_type: str | None) -> float | None:
    """The warm-up its family's fine-tuning recipe uses, where the family's module says one (RoBERTa's 6%)."""
    return ARCHITECTURES[model_type][0].warmup_ratio(model_type) if model_type in ARCHITECTURES else None


def block_dropout(config: dict) -> float | None:
    """The largest dropout inside the encoder's blocks, for families that can recompute them in the backward pass
    (layers.run_block: the long-position ones, whose Sizes say it); None for the others."""
    return module_for(config).Sizes.of(config).block_dropout


def can_recompute_blocks(rate: float | None, dropout: float | None = None) -> bool:
    """Whether blocks with that block_dropout `rate` recompute with the same numbers: they draw no random numbers
    (their dropout at 0, or `dropout`, training.dropout's override of every rate, at 0)."""
    return rate is not None and (rate if dropout is None else dropout) == 0


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
        self.config = types.SimpleNamespace(
            **hf_config, num_labels=len(label_names)
        )
        self.label_names, self.multi_label = list(label_names), multi_label
        self.widest: int | None = None  # bound_width's
        self.encoder = module.Encoder(config, name="encoder")
        self.head = module.Head(config, len(label_names), name="head")

    @property
    def hf_config(self) -> dict:
        """config.json as transformers 5 reads it back: the checkpoint's, with the task's labels and class."""
        return json.loads(self._hf_config_json)

    def encoder_shape(self, embeddings_trained: bool = True) -> EncoderShape:
        return encoder_shape(self.hf_config, len(self.label_names), embeddings_trained)

    def call(self, inputs, training=False):
        """Logits [texts, labels]: one text a row, or packed rows (packed_rows.py) whose texts the head reads apart."""
        hidden, attention_mask = packed_rows.per_text(self.encoder(inputs, training=training), inputs)
        return tf.cast(self.head(hidden, attention_mask, training=training), tf.float32)

    def pooled(self, inputs) -> tf.Tensor:
        """The mean of the encoder's last hidden states over each text's tokens [texts, hidden], float32: a
        representation every family has (their heads pool differently), which `hftfx monitor` compares served texts
        with training texts by."""
        hidden, attention_mask = packed_rows.per_text(self.encoder(inputs, training=False), inputs)
        return tf.cast(masked_mean(hidden, attention_mask), tf.float32)

    def build_weights(self) -> None:
        """Creates every variable by one call on a small batch."""
        ids = tf.constant([[1, 2, 3, 0], [1, 2, 0, 0]], tf.int32)
        self({"input_ids": ids, "attention_mask": tf.cast(ids > 0, tf.int32)}, training=False)

    def get_input_embeddings(self) -> tf_keras.layers.Layer:
        return self.encoder.input_embeddings()

    def recompute_blocks(self) -> None:
        """Training keeps each block's input only and runs the block again in the backward pass (layers.run_block);
        set before the training step is traced, and only where can_recompute_blocks says it is exact."""
        self.encoder.recompute_blocks = True

    def bound_width(self, widest: int, most_rows: int | None = None) -> None:
        """No batch or request wider than `widest` tokens (the run's max_seq_length), nor with more than `most_rows`
        rows where their number is known only at run time (packed rows): attention and the feed-forward leave out
        the ways of computing that cannot happen then (attention.scaled_dot_attention, DenseAfterActivation); set
        before a step or signature is traced."""
        self.widest = widest
        bound_width(self, widest, most_rows)

    def torch_params(self) -> list[TorchParam]:
        return [*self.encoder.torch_params(), *self.head.torch_params()]

    def head_names(self) -> set[str]:
        return {param.name for param in self.head.torch_params()}

    def fresh_copy(self) -> SequenceClassifier:
        """The same architecture and labels, never trained (see from_folder.py: weights_only_copy)."""
        dropped = ("architectures", "id2label", "label2id", "dtype")
        config = {k: v for k, v in self.hf_config.items() if k not in dropped}
        copy = SequenceClassifier(config, self.label_names, self.multi_label)
        if self.widest is not None:  # served as trained: requests cut to max_seq_length
            copy.bound_width(self.widest)
        copy.build_weights()
        return copy


def build(config: dict, label_names: Sequence[str], multi_label: bool = False) -> SequenceClassifier:
    try:
        model = SequenceClassifier(config, label_names, multi_label)
    except (KeyError, TypeError) as error:
        raise UnsupportedConfigError(f"config.json lacks or misstates {error}") from error
    model.build_weights()
    return model


@dataclasses.dataclass(frozen=True)
class ExpectedTensor:
    name: str  # PyTorch's name
    shape: tuple[int, ...]  # as a checkpoint holds it (nn.Linear weights [out, in])
    head: bool  # the classification head's: may start fresh


def expected_tensors(model: SequenceClassifier) -> list[ExpectedTensor]:
    head = model.head_names()
    shapes = [(p, tuple(p.variable.shape)) for p in model.torch_params()]
    return [ExpectedTensor(p.name, shape[::-1] if p.transpose else shape, p.name in head) for p, shape in shapes]


def expected_of_config(config: dict, label_names: Sequence[str], multi_label: bool = False) -> list[ExpectedTensor]:
    """What a checkpoint of this config must hold, from the model built in a graph that never runs: every name and
    shape without allocating a byte of the weights (0.4 s for an 11B-parameter config)."""
    with tf.Graph().as_default():
        return expected_tensors(build(config, label_names, multi_label))


@dataclasses.dataclass(frozen=True)
class Match:
    stored: dict[str, str]  # our weight's PyTorch name -> the checkpoint's name for it
    new: tuple[str, ...]  # head weights the checkpoint lacks (or holds for another label count)
    unused: tuple[str, ...]  # checkpoint tensors no weight reads, in our names (position ids, a masked-LM head)


def match(expected: list[ExpectedTensor], available: dict[str, tuple[int, ...]]) -> Match:
    """Which checkpoint tensor each weight reads, by name and shape; CheckpointError for an encoder weight the
    checkpoint lacks or holds in another shape."""
    prefix = expected[0].name.split(".")[0]
    canonical = _canonical_names(list(available), prefix, _OTHER_PREFIXES.get(prefix, ()))
    stored, new, missing, mismatched = {}, [], [], []
    for tensor in expected:
        name = canonical.get(tensor.name)
        shape = None if name is None else tuple(available[name])
        if shape == tensor.shape:
            stored[tensor.name] = name
        elif tensor.head:
            new.append(tensor.name)
        elif shape is None:
            missing.append(tensor.name)
        else:
            mismatched.append(f"{tensor.name}: checkpoint {shape}, config {tensor.shape}")
    if missing or mismatched:
        raise CheckpointError(
            f"the checkpoint does not match config.json's architecture: missing {missing[:8]} "
            f"({len(missing)} in all), other shapes {mismatched[:4]}"
        )
    read = set(stored.values())
    return Match(stored, tuple(new), tuple(sorted(ours for ours, name in canonical.items() if name not in read)))


def fewest_parameters(config: dict) -> int:
    """A floor on the encoder's parameters from config.json's sizes alone, which every family has: one feed-forward
    matrix and one word embedding row each (ALBERT shares its blocks, and narrows its embeddings)."""
    sizes = module_for(config).Sizes.of(config)
    return sizes.hidden * sizes.intermediate + sizes.vocab


def _check_room_for(parameters: int, qualifier: str, path: Path) -> None:
    """CheckpointError when `path` is too small to hold `parameters` even in bfloat16, the narrowest float."""
    least_bytes = 2 * parameters
    if least_bytes > path.stat().st_size:
        raise CheckpointError(
            f"config.json declares {qualifier}{parameters:,} encoder parameters ({parameters / 1e9:.2f}B), at least "
            f"{least_bytes:,} bytes; {path.name} is {path.stat().st_size:,}: the config is not this checkpoint's"
        )


def check_checkpoint(
    path: Path, header: dict, config: dict, label_names: Sequence[str], multi_label: bool = False
) -> Match:
    """model.safetensors' header (checkpoint_file.read_header: the file whole) against what config.json implies,
    before anything is built or read: the file large enough for the parameters the config declares, every encoder
    weight there in its shape, and no unused tensor larger than any the model reads (not this model's file: it is
    never read)."""
    _check_room_for(fewest_parameters(config), "at least ", path)  # before the graph of a huge config is built
    expected = expected_of_config(config, label_names, multi_label)
    _check_room_for(sum(math.prod(t.shape) for t in expected if not t.head), "", path)
    found = match(expected, {name: entry.shape for name, entry in header.items()})
    for param, name in found.stored.items():
        if not header[name].floating:
            raise CheckpointError(
                f"{path.name} holds {name!r} as {header[name].dtype}, where the model reads {param}'s weights as "
                "floating-point numbers: not a model checkpoint (or a quantized one); use the unquantized weights"
            )
    largest = max(math.prod(t.shape) * 4 for t in expected)
    for name in set(header) - set(found.stored.values()):
        if header[name].nbytes > largest:
            raise CheckpointError(
                f"{path.name} holds {name!r} ({header[name].nbytes:,} bytes), which no weight of the model reads and "
                f"which is larger than any it does ({largest:,}): not this model's checkpoint; refused unread"
            )
    return found


def read_checkpoint(path: Path, found: Match) -> dict[str, np.ndarray]:
    """The tensors `found` says the model reads, under the checkpoint's names; nothing else of the file."""
    return checkpoint_file.read_tensors(path, found.stored.values())


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a checkpoint, floating ones as float32 (tests and tools; the Trainer reads read_checkpoint's)."""
    return checkpoint_file.read_tensors(path, checkpoint_file.read_header(path))


def load(model: SequenceClassifier, state: dict[str, np.ndarray]) -> LoadResult:
    """Assigns the checkpoint's tensors to the model's weights by PyTorch name."""
    found = match(expected_tensors(model), {name: value.shape for name, value in state.items()})
    for param in model.torch_params():
        name = found.stored.get(param.name)
        if name is not None:
            value = state[name].T if param.transpose else state[name]
            param.variable.assign(value.astype(param.variable.dtype.as_numpy_dtype))
    return LoadResult(loaded=len(found.stored), new=found.new, unused=found.unused)


def torch_state(model: SequenceClassifier) -> dict[str, np.ndarray]:
    """The model's weights in PyTorch's names and layouts (nn.Linear weights [out, in])."""
    return {
        param.name: np.ascontiguousarray(param.variable.numpy().T if param.transpose else param.variable.numpy())
        for param in model.torch_params()
    }


def _canonical_names(names: list[str], prefix: str, other_prefixes: tuple[str, ...] = ()) -> dict[str, str]:
    """Our PyTorch name -> the checkpoint's. A bare encoder checkpoint (BertModel, ModernBertModel) names its tensors
    without the task model's prefix, some under an older one (GTE's `new.`); old BERT checkpoints name LayerNorm's
    gamma and beta. transformers renames these when it loads; so do we."""
    known = (prefix, *other_prefixes)
    bare = not any(name.split(".")[0] in known for name in names)
    renamed = {}
    for stored in names:
        head, _, rest = stored.partition(".")
        name = f"{prefix}.{stored}" if bare else f"{prefix}.{rest}" if head in other_prefixes else stored
        for old, new in _LAYER_NORM_RENAMES.items():
            if name.endswith(old) and "LayerNorm" in name:
                name = name.removesuffix(old) + new
        renamed[name] = stored
    return renamed
