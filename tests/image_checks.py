"""Checks run inside the pipeline image (bin/check-image mounts this folder and the compiled specs).

Each imports only what the image installed: the project's modules come from the image's venv, not from a
checkout. Usage inside the container: python image_checks.py SPEC.yaml... (exit 0 when every check passes).
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml


def code_paths(spec: dict) -> set[str]:
    """Every executor class and module function a compiled spec names ('module.' for a bare module)."""
    paths = set()
    for executor in spec["deploymentSpec"]["executors"].values():
        args = executor.get("container", {}).get("args", [])
        if "--executor_class_path" in args:
            paths.add(args[args.index("--executor_class_path") + 1])
    from pipeline.cloud.compiled_specs import component_tasks

    for task in component_tasks(spec).values():
        for name, parameter in task.get("inputs", {}).get("parameters", {}).items():
            value = parameter.get("runtimeValue", {}).get("constant")
            if name in ("run_fn", "preprocessing_fn", "stats_options_updater_fn") and value:
                paths.add(value)
            elif name == "module_path" and value:
                paths.add(value + ".")
    return paths


def check_code_paths(specs: list[Path]) -> None:
    paths = set().union(*(code_paths(yaml.safe_load(spec.read_text())) for spec in specs))
    for path in sorted(paths):
        module, _, name = path.rpartition(".")
        loaded = importlib.import_module(module)
        assert not name or hasattr(loaded, name), f"{path}: {module} has no {name}"
        assert "/opt/hftfx/" in (loaded.__file__ or ""), f"{module} came from {loaded.__file__}, not the image's venv"
    print(f"[image] {len(paths)} code paths of {len(specs)} compiled specs import: {', '.join(sorted(paths))}")


def check_tiny_run() -> str:
    """A whole LocalDagRunner run: packaged corpus, a tiny BERT, offline; returns the pushed version folder."""
    from tiny_model import tiny_run_command, write_tiny_bert

    work = Path(tempfile.mkdtemp(prefix="hftfx-image-"))
    model = write_tiny_bert(work / "tiny-bert")
    summary = work / "summary.json"
    command = tiny_run_command(model, work, "--summary-json", str(summary), python=sys.executable)
    subprocess.run(command, check=True, timeout=900)
    result = json.loads(summary.read_text())
    assert result["blessed"] is True and Path(result["pushed_dir"], "saved_model.pb").is_file(), result
    print(f"[image] tiny run blessed and pushed {result['pushed_dir']}")
    return result["pushed_dir"]


def check_serving(pushed_dir: str) -> None:
    """The image's default command, `hftfx serve`, under the variables a Vertex AI endpoint sets."""
    from vertex_container import http_json, serving

    with serving(["hftfx", "serve"], f"file://{pushed_dir}") as container:
        status, answer = http_json(container.predict, {"instances": ["a warm, funny film", "a tedious mess"]})
    predictions = answer.get("predictions", [])
    assert status == 200 and len(predictions) == 2 and all("label" in p for p in predictions), answer
    print(f"[image] hftfx serve answered Vertex-style predict: {[p['label'] for p in predictions]}")


if __name__ == "__main__":
    check_code_paths([Path(p) for p in sys.argv[1:]])
    check_serving(check_tiny_run())
