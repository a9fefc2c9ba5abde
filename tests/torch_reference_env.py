"""The parity reference (transformers 5 + PyTorch CPU) as the tests reach it: the venv bin/reference-env builds on
the host (`make test` starts it beside pytest), run through tests/torch_reference.py."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "tests" / "reference-requirements.txt"
SCRIPT = ROOT / "tests" / "torch_reference.py"


def reference_python() -> Path:
    """The reference venv's Python, waiting for an install under way; missing, the test fails in CI (where
    `make test` builds it) and is skipped elsewhere with the command that builds it."""
    cache = Path(os.environ.get("HFTFX_ENV_CACHE", Path.home() / ".cache" / "hf-tfx-pipeline"))
    venv = cache / f"reference-{hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:16]}"
    lock = cache / ".reference.lock"
    if lock.exists():
        with lock.open() as held:
            fcntl.flock(held, fcntl.LOCK_SH)  # bin/reference-env holds it exclusively while it installs
    if not (venv / ".hftfx-complete").is_file():
        message = f"no parity reference at {venv}: `bin/reference-env` builds it (see {cache}/reference-pip.log)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return venv / "bin" / "python"


def run(command: str, *args: str, stdin: object = None) -> str:
    """tests/torch_reference.py COMMAND ARGS in the reference environment; `stdin` goes in as JSON."""
    result = subprocess.run(
        [str(reference_python()), str(SCRIPT), command, *args],
        input=None if stdin is None else json.dumps(stdin),
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error", "PYTHONPATH": ""},
    )
    if result.returncode:
        raise AssertionError(f"the reference failed ({command} {args}):\n{result.stderr[-3000:]}")
    return result.stdout


def write_checkpoints(root: Path, families: list[str]) -> dict[str, Path]:
    """family -> a tiny random ...ForSequenceClassification folder transformers 5 wrote (one process for all)."""
    run("checkpoint", str(root), *families)
    return {family: root / family for family in families}


def logits(jobs: list[tuple[Path, dict]]) -> list:
    """The reference's logits for each (model folder, batch of lists), in one process; every folder must load with
    no weight missing, unused or of another shape."""
    answers = json.loads(run("logits", stdin=[{"directory": str(d), "batch": batch} for d, batch in jobs]))
    clean = {"missing_keys": [], "unexpected_keys": [], "mismatched_keys": []}
    for (directory, _), answer in zip(jobs, answers, strict=True):
        assert answer["loading"] == clean, f"{directory}: {answer['loading']}"
    return [answer["logits"] for answer in answers]


def sentence_logits(jobs: list[tuple[Path, dict | None, list[str]]]) -> list[dict]:
    """sentence-transformers' logits for each (folder in its layout, batch of lists or None, texts): "logits" on the
    batch, "encoded" (`encode` of the texts); its encoder must load with no weight unused or of another shape, and
    none missing but the pooler of a bare model whose task model has none (RobertaModel's: sentence-transformers
    reads the tokens' states, never the pooler)."""
    stdin = [{"directory": str(d), "batch": batch, "texts": texts} for d, batch, texts in jobs]
    answers = json.loads(run("sentence-logits", stdin=stdin))
    for (directory, _, _), answer in zip(jobs, answers, strict=True):
        loading = answer["loading"]
        missing = [name for name in loading["missing_keys"] if not name.startswith("pooler.")]
        refused = (missing, loading["unexpected_keys"], loading["mismatched_keys"])
        assert refused == ([], [], []), f"{directory}: {loading}"
    return answers


def on_texts(
    directory, texts: list[str], pairs: list[str] | None = None, windows: dict | None = None, max_length: int = 0
) -> dict:
    """The folder's tokenizer and model in transformers 5 + PyTorch (torch_reference.texts)."""
    job = {"texts": texts, "pairs": pairs, "windows": windows, "max_length": max_length}
    return json.loads(run("texts", str(directory), stdin=job))


def write_modernbert_folder(directory: Path, texts: list[str]) -> Path:
    """A tiny ModernBERT folder as the hub lays it out, by transformers 5 (torch_reference.modernbert_folder)."""
    run("modernbert-folder", str(directory), stdin=texts)
    return directory


def write_encoder_beside(family: str, directory: Path) -> Path:
    """A tiny bare `family` encoder written by transformers 5 beside the tokenizer in `directory`
    (torch_reference.encoder_beside)."""
    run("encoder-beside", family, str(directory))
    return directory
