"""The compiled Kubeflow pipeline executed by Kubeflow's own executor: kfp.local's DockerRunner, each task in the
pipeline image (podman's Docker API standing in for Docker), network off. Run by `make kfp-local`
(bin/kfp-local starts podman's service and builds the image if needed) through tests/kfp_local_test.py.

Test-only, and the only two departures from a cluster run:
- the spec is compiled from configs/kubeflow.yaml made tiny (a few hundred packaged rows, 32 tokens, one
  epoch, thresholds anything meets), then its serving directory is moved under the local root and its image
  renamed to the local build: a real profile's gs:// paths and registry image cannot exist here, and
  validation rightly refuses local ones, so the compiled spec's two values are swapped after compiling.
- kfp.local hands each input artifact the type `system.Artifact` (it looks types up by schemaTitle; TFX
  writes instanceSchema), and TFX then fails "Could not import system.Artifact". `typed_inputs` gives each
  input the type its consuming component declares in inputDefinitions, which is what KFP's backend sends.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "configs" / "kubeflow.yaml"


def tiny_overrides() -> dict[str, Any]:
    return {
        "dataset.name": "packaged:rotten_tomatoes",
        "dataset.label_names": ["rotten", "fresh"],  # the packaged corpus's labels
        "dataset.limits": {"train": 256, "eval": 64, "test": 96},
        "model.max_seq_length": 32,
        "training.epochs": 1,
        "training.batch_size": 16,
        "evaluation": {"min_accuracy": 0.0, "min_auc": 0.0},
    }


def compile_for_local(root: Path, image: str) -> tuple[Path, Path]:
    """The tiny Kubeflow spec, with its serving directory under `root`; returns (spec path, serving dir)."""
    from pipeline.cloud.kubeflow_v2_runner import compile_pipeline
    from pipeline.config import pipeline_config

    config = pipeline_config.load_config(PROFILE, tiny_overrides())
    # Under the pipeline root: the one folder kfp.local mounts into every task's container.
    spec_path, serving = root / "pipeline-kubeflow-tiny.yaml", root / "kfp-root" / "serving"
    compile_pipeline(config, spec_path)
    text = spec_path.read_text().replace(config.serving_dir, str(serving)).replace(config.cloud.image_uri, image)
    spec_path.write_text(text)
    return spec_path, serving


@contextlib.contextmanager
def typed_inputs():
    """kfp.local's executor input with each input artifact typed as its consumer declares it (see above)."""
    from kfp.local import executor_input_utils

    original = executor_input_utils.construct_executor_input

    def construct(component_spec, arguments, task_root, block_input_artifact):
        executor_input = original(component_spec, arguments, task_root, block_input_artifact)
        for name, artifacts in executor_input.inputs.artifacts.items():
            declared = component_spec.input_definitions.artifacts[name].artifact_type
            for artifact in artifacts.artifacts:
                artifact.type.CopyFrom(declared)
        return executor_input

    executor_input_utils.construct_executor_input = construct
    try:
        yield
    finally:
        executor_input_utils.construct_executor_input = original


def execute(spec_path: Path, root: Path) -> float:
    """Runs every task of the spec with kfp.local's DockerRunner (network none); returns the wall seconds."""
    from kfp import components, local

    # Each task as the user running this (the owner of the mounted root), as a local docker run is made: the
    # image's own user could not write into a root the host created.
    runner = local.DockerRunner(network_mode="none", user=f"{os.getuid()}:{os.getgid()}")
    local.init(runner=runner, pipeline_root=str(root / "kfp-root"))
    pipeline = components.load_component_from_file(str(spec_path))
    start = time.monotonic()
    with typed_inputs():
        pipeline()
    return time.monotonic() - start


def task_outputs(root: Path) -> dict[str, dict]:
    """Each task's executor_output.json (what the task reported to the orchestrator), by task folder."""
    return {
        p.parent.name: json.loads(p.read_text()) for p in sorted((root / "kfp-root").glob("*/*/executor_output.json"))
    }


def spec_tasks(spec_path: Path) -> list[str]:
    from pipeline.cloud.compiled_specs import component_tasks

    return sorted(component_tasks(yaml.safe_load(spec_path.read_text())))
