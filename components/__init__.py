"""Custom TFX components and the module code the standard components run."""

from models import environment as _environment

_environment.configure()

# Custom artifact types by their TYPE_NAME, `components.<Name>`: in a Kubeflow v2 / Vertex container TFX's
# entrypoint imports an artifact's class from its type's schema title. Loaded on first use, since importing
# this package must stay light (the storage-event function imports parts of it without TFX).
_ARTIFACT_TYPES = {"HuggingFaceModel": "components.publisher.component", "ScoredRows": "components.scorer.component"}


def __getattr__(name: str):
    if name in _ARTIFACT_TYPES:
        import importlib

        return getattr(importlib.import_module(_ARTIFACT_TYPES[name]), name)
    raise AttributeError(f"module 'components' has no attribute {name!r}")
