"""A model folder's classifier: its architecture checked, the checkpoint's header matched against config.json, our
encoder built (models/encoders/classifier.py) and loaded with verified weights.

Every architecture trains as our own encoder (each family of classifier.ARCHITECTURES), built from config.json and
loaded from model.safetensors in PyTorch names with no transformers model class (transformers 5 has no TensorFlow).
Any other architecture is refused before the first component, naming the families that work. The only weights allowed
to start fresh are the classification head's. Where the folder comes from is models/hub/pretrained.py's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from models.encoders import checkpoint_file, classifier
from models.encoders.layers import UnsupportedConfigError
from models.encoders.pooling import PoolingChoice, choose_pooling, pooled_config
from models.errors import UserError
from models.hardware.flops import EncoderShape
from models.hub import sentence_transformers
from models.hub.pretrained import read_config, weights_file


class WeightsError(UserError, RuntimeError):
    """Pretrained weights did not load fully into the encoder."""


class UnsupportedModelError(UserError, ValueError):
    """The architecture has no encoder here; the message says why and which families work."""


@dataclasses.dataclass(frozen=True)
class Architecture:
    """The encoder a model trains as (models/encoders) and what it computes."""

    model_type: str
    class_name: str  # transformers' PyTorch sequence-classification class the model is, as transformers 5 names it
    facts: str = ""  # what the encoder computes that matters for the task (positions, attention window)

    def describe(self) -> str:
        path = f"our Keras encoder, loaded from model.safetensors ({self.class_name} as transformers 5 computes it)"
        return f"{self.model_type}: {path}" + (f"; {self.facts}" if self.facts else "")


@dataclasses.dataclass(frozen=True)
class LoadReport:
    """What loading the pretrained weights did; `missing` may hold only the head's weights."""

    weights_format: str
    loaded: int
    missing: tuple[str, ...]
    unexpected: tuple[str, ...]

    def describe(self) -> str:
        return (
            f"{self.loaded} pretrained tensors loaded ({self.weights_format}); "
            f"new (classification head): {list(self.missing)}; unused from checkpoint: {list(self.unexpected)}"
        )


@dataclasses.dataclass(frozen=True)
class ModelFolder:
    """A model folder's facts from one reading of its config.json, checked: passed down (the preflight, the doctor's
    estimate, the Trainer, the export) rather than the folder read again by each step."""

    directory: Path
    config: dict  # config.json, as read once
    architecture: Architecture
    shape: EncoderShape  # its sizes, for FLOP counts and the memory estimate (two labels: the head is the task's)
    position_limit: int  # the longest input (special tokens included) its positions hold
    block_dropout: float | None  # inside its blocks, where they can be recomputed (classifier.block_dropout)
    pooling: PoolingChoice  # which tokens the head reads (model.pooling), already in `config`
    weights: Path | None = None  # model.safetensors, when the reader asked for weights (None: config and tokenizer)

    @property
    def model_type(self) -> str:
        return self.architecture.model_type

    def trained_shape(self, embeddings_trained: bool = True) -> EncoderShape:
        """Its sizes with whether the input embeddings train (frozen, their gradient is not computed)."""
        return dataclasses.replace(self.shape, embeddings_trained=embeddings_trained)

    def with_weights(self) -> ModelFolder:
        """The folder with model.safetensors found, or the ModelFilesError naming it."""
        return self if self.weights else dataclasses.replace(self, weights=weights_file(self.directory))

    def checkpoint(self) -> Path:
        """model.safetensors, as found when the folder was read with its weights."""
        if self.weights is None:
            raise ValueError(f"{self.directory} was read without its weights: read_model_folder(weights=True)")
        return self.weights


def read_model_folder(directory: Path, weights: bool = True, pooling: str = "auto") -> ModelFolder:
    """The folder's config.json read once and checked (check_architecture), with the head's pooling chosen
    (model.pooling: models/encoders/pooling.py) and what the rest asks of it; with `weights`, model.safetensors must
    be there too (after the architecture: the more fundamental refusal first)."""
    read = read_config(directory)
    try:
        choice = choose_pooling(pooling, read.get("model_type"), sentence_transformers.declared_pooling(directory))
    except UnsupportedConfigError as error:
        check_architecture(directory, read)  # the more fundamental refusal first, where there is one
        raise UnsupportedModelError(f"the model in {directory}: {error}") from error
    config = pooled_config(read, choice)
    folder = ModelFolder(
        directory,
        config,
        check_architecture(directory, config),
        classifier.encoder_shape(config, 2),
        classifier.position_limit(config),
        classifier.block_dropout(config),
        choice,
    )
    return folder.with_weights() if weights else folder


def check_architecture(directory: Path, config: dict) -> Architecture:
    """The encoder the config.json of `directory` trains as, or a refusal naming the families that work."""
    model_type = config.get("model_type")
    if not classifier.is_ported(model_type):
        raise UnsupportedModelError(
            f"the model in {directory} is a '{model_type}' model, which cannot be fine-tuned here: no encoder of ours "
            f"computes it. Families that work: {classifier.PORTED_FAMILIES}; pick a model of one of them "
            "(docs/models.md)"
        )
    try:
        classifier.check_config(config)
    except UnsupportedConfigError as error:
        raise UnsupportedModelError(
            f"the {model_type} model in {directory} has {error}, which our {model_type} encoder does not compute"
        ) from error
    except KeyError as error:
        message = f"the config.json of {directory} lacks {error}, which a {model_type} model needs"
        raise UnsupportedModelError(message) from error
    class_name = classifier.ARCHITECTURES[model_type][1]
    if classifier.pools_unlike_transformers(config):  # the bare encoder, pooled as sentence-transformers pools
        class_name = f"{classifier.bare_class(config)} + sentence-transformers' mean pooling"
    return Architecture(model_type, class_name, classifier.describe(config))


def encoder_shape(directory: Path, embeddings_trained: bool = True) -> EncoderShape:
    """The encoder's sizes as the FLOP count reads them (models/hardware/flops.py), or a refusal naming the reason."""
    return read_model_folder(directory, weights=False).trained_shape(embeddings_trained)


def position_limit(directory: Path) -> int:
    """The longest input (special tokens included) the model's position embeddings hold (RoBERTa-style
    embeddings number positions from the padding id up: models/encoders says per family)."""
    return read_model_folder(directory, weights=False).position_limit


def build_classifier(
    folder: ModelFolder,
    label_names: Sequence[str],
    dropout: float | None = None,
    freeze_embeddings: bool = False,
    multi_label: bool = False,
):
    """The sequence classifier with pretrained encoder weights and the checkpoint's head, or a fresh one for
    `label_names` where it has none for them.

    Returns (model, LoadReport). The global Keras mixed-precision policy in force is used. `dropout` None keeps
    the checkpoint's own rates; a number sets every dropout layer to it (see set_dropout). `freeze_embeddings`
    keeps the input embeddings as pretrained (see freeze_input_embeddings).
    """
    model, report = build_with_own_encoder(folder, label_names, multi_label)
    if dropout is not None:
        set_dropout(model, dropout)
    if freeze_embeddings:
        freeze_input_embeddings(model)
    return model, report


def build_with_own_encoder(folder: ModelFolder, label_names: Sequence[str], multi_label: bool):
    """(model, LoadReport) of our encoder for a ported architecture (models/encoders)."""
    found = check_weights(folder, label_names, multi_label)  # before a byte of the model is allocated
    model = classifier.build(folder.config, label_names, multi_label)
    result = classifier.load(model, classifier.read_checkpoint(folder.checkpoint(), found))
    from_dense = _load_dense_head(model, folder.directory) if result.new else set()
    new = tuple(name for name in result.new if name not in from_dense)
    return model, LoadReport("safetensors", result.loaded + len(from_dense), new, found.unused)


def _load_dense_head(model, directory: Path) -> set[str]:
    """Our export of a mean-pooling head keeps it in the sentence-transformers layout's two Dense modules
    (models/serving/sentence_transformers_export.py): a warm start from it reads the head back from there. Returns
    the head weights loaded (none where the layers are not there, or are of other shapes: another label set)."""
    layers = sentence_transformers.dense_layers(directory)
    params = list(model.head.torch_params())
    if not classifier.pools_unlike_transformers(model.hf_config) or len(layers) * 2 != len(params):
        return set()
    values = [value for weight, bias in layers for value in (weight.T, bias)]  # [out, in] there, [in, out] here
    if any(v is None or tuple(v.shape) != tuple(p.variable.shape) for p, v in zip(params, values, strict=True)):
        return set()
    for param, value in zip(params, values, strict=True):
        param.variable.assign(value.astype(param.variable.dtype.as_numpy_dtype))
    return {param.name for param in params}


def check_weights(
    folder: ModelFolder, label_names: Sequence[str] = ("0", "1"), multi_label: bool = False, values: bool = False
):
    """model.safetensors' header checked against config.json (classifier.check_checkpoint), and with `values` every
    weight the model reads a finite number (read a tensor at a time): what `--check` runs; the Trainer checks the
    header again before it builds the model. Returns what the model will read of the file."""
    checkpoint = folder.checkpoint()
    try:
        header = checkpoint_file.read_header(checkpoint)
        found = classifier.check_checkpoint(checkpoint, header, folder.config, label_names, multi_label)
    except classifier.CheckpointError as error:
        raise WeightsError(f"pretrained weights in {checkpoint}: {error}") from error
    if values:
        checkpoint_file.check_finite(checkpoint, found.stored.values())
    return found


def freeze_input_embeddings(model) -> None:
    """Marks the input embeddings layer (word, position and token-type tables and their LayerNorm) not
    trainable, through the encoder's get_input_embeddings (every family names its own). The word
    table is about half of a small encoder's weights (MiniLM-L6: 11.7M of 22.7M): frozen, AdamW no longer reads
    and writes it and its two moments every step, and nothing computes the gradient below the first layer."""
    embeddings = model.get_input_embeddings()
    if not embeddings.trainable_weights:
        raise WeightsError(f"{type(model).__name__} has no trainable input embeddings (frozen already): cannot freeze")
    embeddings.trainable = False


def set_dropout(model, rate: float) -> None:
    """Sets every Keras dropout layer of `model` (embeddings, attention, hidden, head) to `rate`. On the built
    layers, not the config: each architecture names its dropout settings differently
    (BERT's hidden_dropout_prob, DistilBERT's dropout, ...), while every encoder of ours uses Keras' Dropout, which
    reads its rate when the training step is traced."""
    import tf_keras

    layers = [m for m in model.submodules if isinstance(m, tf_keras.layers.Dropout)]
    if not layers:
        raise WeightsError(f"{type(model).__name__} has no Keras dropout layers: training.dropout cannot act on it")
    for layer in layers:
        layer.rate = rate


def weights_only_copy(model):
    """The trained classifier's weights in a model that never trained. The trained one tracks its optimizer,
    so saving it also saves AdamW's two slots per weight: a SavedModel three times the size, slower to load
    and to push, for state serving never reads."""
    copy = model.fresh_copy()
    if not model.get_input_embeddings().trainable:
        freeze_input_embeddings(copy)  # get_weights lists trainable weights first: the orders must match
    copy.set_weights(model.get_weights())
    return copy
