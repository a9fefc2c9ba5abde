"""The compiled Kubeflow pipeline executed by kfp.local's DockerRunner (tests/kfp_local.py): `make kfp-local`.

The fast test checks what the executor needs of every compiled spec without running it: TFX's Kubeflow v2
entrypoint imports each artifact's class from its type's schema title.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests import kfp_local

ROOT = Path(__file__).resolve().parents[1]
SPECS = ("pipeline.yaml", "pipeline-kubeflow.yaml", "pipeline-retraining.yaml")


@pytest.mark.parametrize("spec", SPECS)
def test_every_artifact_type_in_the_spec_imports_as_the_entrypoint_imports_it(spec):
    """What failed the HFPublisher ('Could not import hftfx.HuggingFaceModel') the first time the Kubeflow spec
    was executed: a custom type's title must be its class's import path."""
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_entrypoint_utils as entrypoint
    from tfx.utils import import_utils

    components = yaml.safe_load((ROOT / spec).read_text())["components"]
    types = [
        artifact["artifactType"]
        for component in components.values()
        for side in ("inputDefinitions", "outputDefinitions")
        for artifact in component.get(side, {}).get("artifacts", {}).values()
    ]
    assert types
    for schema in types:
        parsed = json_format.ParseDict(schema, pipeline_spec_pb2.ArtifactTypeSchema())
        import_utils.import_class_by_path(entrypoint._retrieve_class_path(parsed))


@pytest.mark.slow
@pytest.mark.e2e
def test_the_kubeflow_spec_runs_under_kfp_local_blesses_and_pushes_a_servable_version(tmp_path):
    if not os.environ.get("DOCKER_HOST") or not os.environ.get("HFTFX_KFP_IMAGE"):
        pytest.skip("needs podman's Docker API and the image: run `make kfp-local` (bin/kfp-local)")
    spec, serving = kfp_local.compile_for_local(tmp_path, os.environ["HFTFX_KFP_IMAGE"])
    seconds = kfp_local.execute(spec, tmp_path)
    outputs = kfp_local.task_outputs(tmp_path)
    # kfp.local names a task folder by its component name less five characters (it expects a 'comp-' prefix
    # TFX does not write), so the tasks are matched by the artifacts they reported, not by folder names.
    reported = sorted(key for output in outputs.values() for key in output.get("artifacts", {}))
    print(f"[kfp-local] {len(outputs)} of {len(kfp_local.spec_tasks(spec))} tasks reported outputs in {seconds:.0f} s")
    assert len(outputs) == len(kfp_local.spec_tasks(spec)), sorted(outputs)
    for key in ("examples", "model", "blessing", "pushed_model", "hf_model"):
        assert key in reported, reported
    (evaluator,) = [o for o in outputs.values() if "blessing" in o["artifacts"]]
    assert evaluator["artifacts"]["blessing"]["artifacts"][0]["metadata"]["blessed"] == 1
    (version,) = [p for p in (serving / "text_classifier").iterdir() if p.name.isdigit()]
    assert (version / "saved_model.pb").is_file()
    checked = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "serve-check", str(version)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-2000:]
    print(json.dumps({"kfp_local_wall_seconds": round(seconds)}))
