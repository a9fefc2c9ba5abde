"""The image recipe (Dockerfile): the lock installed, every module the spec names, the Dataflow and GPU targets."""

import json
import re

from tests.cloud_specs import (
    ROOT,
    dockerfile_stages,
)


def test_the_dataflow_target_boots_workers_with_beams_own_program_of_the_locked_version():
    """Dataflow starts a custom container by its entrypoint, Beam's boot program, which must come from the
    Beam SDK image of the same Beam and Python versions as the image's packages."""
    import tomllib

    stages = dockerfile_stages()
    args = dict(rest.split("=", 1) for instruction, rest in stages[""] if instruction == "ARG" and "=" in rest)
    locked = {p["name"]: p["version"] for p in tomllib.loads((ROOT / "uv.lock").read_text())["package"]}
    python = re.search(r"python:(\d+\.\d+)", args["BASE_IMAGE"]).group(1)
    assert args["BEAM_SDK_IMAGE"] == f"docker.io/apache/beam_python{python}_sdk:{locked['apache-beam']}"
    assert ("FROM", "${BEAM_SDK_IMAGE} AS beam-sdk") in stages["beam-sdk"]
    dataflow = stages["dataflow"]
    assert dataflow[0] == ("FROM", "base AS dataflow")  # the project's packages, as every component image
    assert ("COPY", "--from=beam-sdk /opt/apache/beam /opt/apache/beam") in dataflow
    assert ("ENTRYPOINT", '["/opt/apache/beam/boot"]') in dataflow
    assert ("ENV", "RUN_PYTHON_SDK_IN_DEFAULT_ENVIRONMENT=1") in dataflow  # boot's own venv would not see ours
    assert list(stages)[-1] == "cpu"  # a build without --target still gives the pipeline image


def test_image_recipe_installs_the_lock_and_every_module_the_spec_names(committed):
    """A cheap guard on the recipe; tests/image_test.py (`make image`) builds the image and runs it."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    # The lock needs Python >= 3.11: TFX's own image (Python 3.10) cannot be the base.
    assert "FROM ${BASE_IMAGE} AS base" in dockerfile and "python:3.13-slim-trixie" in dockerfile
    assert "uv export --frozen" in dockerfile and "--require-hashes" in dockerfile
    assert "TF_USE_LEGACY_KERAS=1" in dockerfile
    copied = set(re.findall(r"^COPY (\w+)/ ", dockerfile, flags=re.MULTILINE))
    referenced = set(re.findall(r"\b(components|models|pipeline)\.[a-z_.]+", json.dumps(committed)))
    assert referenced and referenced <= copied
    for package in copied:
        assert (ROOT / package / "__init__.py").exists() or package == "configs"


def test_the_gpu_target_installs_cuda_wheels_hash_checked_from_the_lock():
    """TensorFlow's and-cuda extra is the project's gpu extra: locked, and installed with --require-hashes."""
    import tomllib

    stages = dockerfile_stages()
    (run,) = [rest for instruction, rest in stages["gpu"] if instruction == "RUN"]
    assert "--extra gpu" in run and "--require-hashes" in run and "--frozen" in run
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["optional-dependencies"]["gpu"] == ["tensorflow[and-cuda]==2.21.*"]
    locked = {p["name"] for p in tomllib.loads((ROOT / "uv.lock").read_text())["package"]}
    assert {"nvidia-cudnn-cu12", "nvidia-cublas-cu12"} <= locked


def test_the_installers_are_pinned_by_hash_and_the_base_image_by_digest():
    """What the lock's hash checks rest on: the base image's bytes (a digest, not a tag), uv's wheel (its hash,
    shared by bin/env.sh and the image) and the setuptools that builds the project (the locked, checked one)."""
    import tomllib

    dockerfile = (ROOT / "Dockerfile").read_text()
    (base,) = re.findall(r"^ARG BASE_IMAGE=(\S+)$", dockerfile, flags=re.MULTILINE)
    assert re.fullmatch(r"docker\.io/library/python:3\.13-slim-trixie@sha256:[0-9a-f]{64}", base)
    pinned = (ROOT / "bin" / "uv-requirements.txt").read_text()
    assert (
        re.search(r"^uv==[\d.]+ \\$", pinned, flags=re.MULTILINE)
        and len(re.findall(r"sha256:[0-9a-f]{64}", pinned)) >= 2
    )
    assert "pip install --no-cache-dir --require-hashes -r /tmp/uv-requirements.txt" in dockerfile
    assert '--require-hashes -r "$HFTFX_ROOT/bin/uv-requirements.txt"' in (ROOT / "bin" / "env.sh").read_text()
    assert "uv pip install --no-deps --no-build-isolation ." in dockerfile
    locked = {p["name"]: p["version"] for p in tomllib.loads((ROOT / "uv.lock").read_text())["package"]}
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    assert requires == [f"setuptools=={locked['setuptools']}"]
