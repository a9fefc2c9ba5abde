"""`hftfx function-source`: the source folder of the storage-event Cloud Run function, as Cloud Run takes it.

Cloud Run functions build a Python source folder with main.py at its root and its requirements.txt; they do
not install this project. So the folder holds main.py (pipeline/retraining/function/main.py), the profile as
resolved with its overrides (profile.yaml), the spec compiled from exactly that profile (pipeline.yaml), this
project's packages, and requirements.txt: the lock's `function` dependency group, hash-pinned, exported by uv
(the lock's own exporter: a hand-made resolver of uv.lock would miss its environment markers).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import yaml

from components.example_gen import spans
from pipeline.config.pipeline_config import ConfigError, PipelineConfig

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("pipeline", "components", "models")
MAIN = Path(__file__).resolve().parent / "function" / "main.py"
ENTRY_POINT = "on_object_finalized"
# Memory of the deployed function (`gcloud functions deploy --memory`; the default 256Mi is too little): the
# peak of functions-framework handling an event (aiplatform's client loaded), measured by
# tests/event_function_test.py, must stay under three quarters of it.
MEMORY = "512Mi"


def requirements_txt() -> str:
    """The `function` dependency group of uv.lock, every package pinned with its hashes."""
    uv = os.environ.get("HFTFX_UV") or shutil.which("uv")
    if not uv:
        raise ConfigError("uv is needed to export the function's locked requirements: run through bin/in-env")
    exported = subprocess.run(
        [uv, "export", "--frozen", "--only-group", "function", "--no-emit-project", "--format", "requirements-txt"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if exported.returncode:
        raise ConfigError(f"uv export of the function's requirements failed: {exported.stderr.strip()}")
    return exported.stdout


def check_event_profile(config: PipelineConfig) -> None:
    """What a profile needs to be driven by storage events, refused before any folder is written."""
    problems = []
    if config.retraining.policy != "new_data":
        problems.append("the storage-event function applies retraining.policy new_data; set it in the profile")
    if not spans.is_spanned(config.dataset):
        problems.append("no dataset file pattern holds {SPAN}: no object event could name a span")
    if not config.dataset.ready_marker:
        problems.append(
            "dataset.ready_marker is empty: the first file of a span to land would start its run, which would "
            "train on a half-uploaded span; upload a span's files, then a marker, and name it (e.g. _SUCCESS)"
        )
    if not config.retraining.event_service_account.endswith(".iam.gserviceaccount.com"):
        problems.append(
            "retraining.event_service_account must name the function's own service account (it creates and "
            "cancels pipeline jobs; `hftfx doctor --cloud` lists its roles)"
        )
    if problems:
        raise ConfigError("this profile cannot drive the storage-event function:\n  - " + "\n  - ".join(problems))


def data_bucket(config: PipelineConfig) -> str:
    """The bucket whose object events name spans: that of the first pattern holding {SPAN}."""
    return spans.spanned_patterns(config.dataset)[0].removeprefix("gs://").split("/", 1)[0]


def deploy_command(config: PipelineConfig, source: Path) -> list[str]:
    """`gcloud functions deploy` of the folder: retried deliveries (a transient Vertex error must not lose a
    span; the handler makes repeats no-ops), the function's own identity for running and being invoked."""
    identity = config.retraining.event_service_account
    return [
        "gcloud", "functions", "deploy", f"{config.pipeline_name}-on-data", "--gen2", "--runtime", "python313",
        "--region", config.cloud.region, "--source", str(source), "--entry-point", ENTRY_POINT,
        "--memory", MEMORY, "--retry",
        "--trigger-event-filters", "type=google.cloud.storage.object.v1.finalized",
        "--trigger-event-filters", f"bucket={data_bucket(config)}",
        "--service-account", identity, "--trigger-service-account", identity,
    ]  # fmt: skip


def write_function_source(config: PipelineConfig, output: Path) -> list[str]:
    """Writes the folder, once the profile is known to compile; returns what was written, top level."""
    from pipeline.cloud.kubeflow_v2_runner import compile_pipeline
    from pipeline.cloud.profile import validate_cloud

    validate_cloud(config)  # before anything is written: a refused profile leaves no half-made folder
    check_event_profile(config)
    if output.exists() and any(output.iterdir()):
        raise ConfigError(f"{output} is not empty: give a new folder, the function's source is written whole")
    output.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*_test.py", "*.pyc")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, output / package, ignore=ignore)
    shutil.copy(MAIN, output / "main.py")
    (output / "profile.yaml").write_text(
        yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False), encoding="utf-8"
    )
    compile_pipeline(config, output / "pipeline.yaml")
    (output / "requirements.txt").write_text(requirements_txt(), encoding="utf-8")
    return sorted(p.name for p in output.iterdir())
