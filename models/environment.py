"""Process settings every process of the project needs before TensorFlow is imported.

Our encoders are Keras 2 (`tf_keras`) models, as TFT and TFMA expect, so TensorFlow must be told to use legacy Keras
before its first import, in the CLI, in tests and in every Beam worker that imports our modules. Each
package's `__init__` calls `configure()`, so importing any of our code is enough.
"""

from __future__ import annotations

import os
import sys

from models.errors import UserError

_DEFAULTS = {
    "TF_USE_LEGACY_KERAS": "1",
    "TF_CPP_MIN_LOG_LEVEL": "2",  # TF's C++ start-up chatter (CUDA probing on CPU hosts) hides progress.
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TRANSFORMERS_VERBOSITY": "error",  # tokenizer loading's advice is for PyTorch users; we report our own
    "TOKENIZERS_PARALLELISM": "false",  # fork-safety for Beam's multi-process runner.
}


class KerasVersionError(UserError, RuntimeError):
    """TensorFlow was imported before the project could configure it."""


def configure() -> None:
    """Sets the process defaults; fails loudly when TensorFlow already runs with the wrong Keras."""
    if os.environ.get("TF_USE_LEGACY_KERAS") not in (None, "1", "true", "True"):
        raise KerasVersionError(
            "TF_USE_LEGACY_KERAS is set to something other than 1; our encoders, TFT and TFMA need Keras 2. "
            "Unset it or set TF_USE_LEGACY_KERAS=1."
        )
    if "tensorflow" in sys.modules and "TF_USE_LEGACY_KERAS" not in os.environ:
        raise KerasVersionError(
            "TensorFlow was imported before TF_USE_LEGACY_KERAS=1 was set; import this project's modules "
            "first, or run through bin/in-env, which sets it."
        )
    for name, value in _DEFAULTS.items():
        os.environ.setdefault(name, value)


def offline_hub() -> bool:
    """True when the Hugging Face hub must not be contacted (HF_HUB_OFFLINE=1)."""
    return os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes")
