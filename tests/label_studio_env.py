"""Label Studio's SDK as the tests reach it: tests/label_studio_reference.py in the reference environment
(bin/reference-env), the only place it is installed."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.torch_reference_env import reference_python

SCRIPT = Path(__file__).resolve().parent / "label_studio_reference.py"


def _run(command: str, config: Path, tasks: Path, stdin: object = None) -> object:
    result = subprocess.run(
        [str(reference_python()), str(SCRIPT), command, str(config), str(tasks)],
        input=None if stdin is None else json.dumps(stdin),
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ""},
    )
    if result.returncode:
        raise AssertionError(f"Label Studio's SDK failed ({command}):\n{result.stderr[-3000:]}")
    return json.loads(result.stdout)


def problems(config: Path, tasks: Path) -> list[str]:
    """What Label Studio's parser finds wrong with the labeling config and the tasks ([] when it takes them)."""
    return _run("check", config, tasks)


def labeled_export(config: Path, tasks: Path, labels: list[str | None]) -> list[dict]:
    """Label Studio's JSON export of the tasks once a person chose `labels` (None: skipped)."""
    return _run("export", config, tasks, labels)
