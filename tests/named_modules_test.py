"""Every module, class and function of ours that a file outside Python names resolves: the Dockerfile's import check,
the Makefile's `python -m` targets, the compiled specs' executor classes and module functions, configs/, docs and
bin/. A move of a module that forgets one of them fails here, not in an image build or a cloud run (a Dockerfile
that imported a moved executor kept every image from building while the Python tests stayed green)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("components", "models", "pipeline", "benchmarks", "tests")
# A dotted name starting at one of our packages, not inside a longer dotted name (tfx.components.x is TFX's) or a path
DOTTED = re.compile(rf"(?<![\w.\-/])(?:{'|'.join(PACKAGES)})(?:\.[A-Za-z_]\w*)+")


# Where the rest of the checkout names our code (no git inside the test environment to list the tracked files)
OUTSIDE_PYTHON = (
    "Dockerfile", "Makefile", "*.yaml", "*.md", "*.toml", "configs/*", "docs/*", "bin/*", "bin/env-bin/*", ".ci/*",
)  # fmt: skip


def _files_outside_python() -> list[Path]:
    return sorted({path for pattern in OUTSIDE_PYTHON for path in ROOT.glob(pattern) if path.is_file()})


def _is_a_file_name(name: str) -> bool:
    """`pipeline.yaml`, `models.md`: a file of the checkout or a page, not a module path."""
    suffix = name.rpartition(".")[2]
    return suffix in {"yaml", "yml", "md", "json", "txt", "toml", "py"} or (ROOT / name).exists()


def named_objects() -> list[tuple[str, str]]:
    found = set()
    for path in _files_outside_python():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        found |= {(path.relative_to(ROOT).as_posix(), m) for m in DOTTED.findall(text) if not _is_a_file_name(m)}
    return sorted(found)


NAMED = named_objects()


def resolve(dotted: str) -> object:
    """The object a dotted name means, as importlib and TFX's import_class_by_path find it: modules imported as far as
    they go, the rest attributes."""
    parts = dotted.split(".")
    target = importlib.import_module(parts[0])
    for index, part in enumerate(parts[1:], start=1):
        if hasattr(target, part):
            target = getattr(target, part)
            continue
        target = importlib.import_module(".".join(parts[: index + 1]))
    return target


def test_the_files_outside_python_name_our_modules():
    """The scan finds what it is for: the Dockerfile's, the Makefile's and the compiled specs' names."""
    sources = {source for source, _ in NAMED}
    assert {"Dockerfile", "Makefile", "pipeline.yaml", "pipeline-kubeflow.yaml", "pipeline-retraining.yaml"} <= sources
    assert ("Dockerfile", "components.pusher.endpoint") in NAMED
    assert ("pipeline.yaml", "components.trainer.module.run_fn") in NAMED


@pytest.mark.parametrize(("source", "dotted"), NAMED, ids=[f"{s}:{d}" for s, d in NAMED])
def test_a_named_module_resolves(source, dotted):
    try:
        resolve(dotted)
    except (ImportError, AttributeError) as error:
        pytest.fail(f"{source} names {dotted}, which does not resolve: {type(error).__name__}: {error}")
