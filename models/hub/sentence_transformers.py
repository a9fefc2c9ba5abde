"""What a model folder in the sentence-transformers layout says beyond transformers' files: how its embeddings pool
the tokens (`1_Pooling/config.json`, which `model.pooling: auto` follows), and the dense layers after the pooling
(our export of a mean-pooling classifier: models/serving/sentence_transformers_export.py writes them, a warm start
reads its head back from them).

Read as JSON and safetensors, not through the sentence_transformers package: it needs PyTorch, which the pipeline's
environment does not hold.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

MODULES_FILE = "modules.json"  # the modules in order: [{"idx", "name", "path", "type"}]
CONFIG_FILE, WEIGHTS_FILE = "config.json", "model.safetensors"  # each module folder's, as sentence-transformers saves
POOLING_DIR = "1_Pooling"  # where sentence-transformers saves the Pooling module (second of every model it builds)
# Module types under the names every sentence-transformers release since 2.0 loads (6.x maps them to its new modules)
TRANSFORMER, POOLING, DENSE = (f"sentence_transformers.models.{name}" for name in ("Transformer", "Pooling", "Dense"))
# sentence-transformers' pooling modes (legacy `pooling_mode_<mode>_token(s)` flags, or 6.x's `pooling_mode`) ->
# ours: the first token (the classifiers' own) or the masked mean; others (max, last token) have no head here
_POOLING_MODES = {"cls": "cls", "mean": "mean", "pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean"}


def modules(directory: Path) -> list[dict]:
    """modules.json's entries, or [] where the folder has none (or it is not a list of modules)."""
    path = directory / MODULES_FILE
    try:
        entries = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []
    except (UnicodeDecodeError, json.JSONDecodeError):
        return []
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def module_paths(directory: Path) -> list[str]:
    """The subfolders its modules live in (the Transformer's is the folder itself)."""
    return [str(e["path"]) for e in modules(directory) if e.get("path")]


def declared_pooling(directory: Path) -> str | None:
    """'mean' or 'cls' where the folder's sentence-transformers Pooling module pools that one way; None where it
    has no such module or pools otherwise (max, last token, several modes at once)."""
    for entry in modules(directory):
        if str(entry.get("type", "")).rsplit(".", 1)[-1].lower() != "pooling":
            continue
        try:
            config = json.loads((directory / str(entry.get("path", "")) / CONFIG_FILE).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            return None
        mode = config.get("pooling_mode")  # 6.x: one name or a list; earlier: a flag per mode
        flags = [k for k, on in config.items() if k.startswith("pooling_mode_") and on is True]
        modes = [mode] if isinstance(mode, str) else mode if isinstance(mode, list) else flags
        return _POOLING_MODES.get(modes[0]) if len(modes) == 1 else None
    return None


def dense_layers(directory: Path) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """(weight [out, in], bias) of each Dense module after the pooling, in order; [] where there are none."""
    from safetensors.numpy import load_file

    layers = []
    for entry in modules(directory):
        if entry.get("type") == DENSE:
            state = load_file(directory / str(entry["path"]) / WEIGHTS_FILE)
            layers.append((state["linear.weight"], state.get("linear.bias")))
    return layers
