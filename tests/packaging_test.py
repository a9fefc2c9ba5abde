"""The installed package (what the Dockerfile's `uv pip install .` puts in the image) holds what it reads at
run time, not only its modules."""

import shutil
import zipfile
from pathlib import Path

from setuptools import build_meta

ROOT = Path(__file__).parent.parent


def test_the_wheel_carries_the_default_run_figures_doctor_estimates_from(tmp_path, monkeypatch):
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in ("pipeline", "components", "models"):
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.chdir(source)  # setuptools builds the project in the working directory
    wheel = source / build_meta.build_wheel(str(tmp_path / "dist"))
    wheel = tmp_path / "dist" / wheel.name
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert "pipeline/machine/default_run.json" in names
        assert (
            archive.read("pipeline/machine/default_run.json")
            == (ROOT / "pipeline" / "machine" / "default_run.json").read_bytes()
        )
    assert {"pipeline/cli/__main__.py", "components/example_gen/config.py", "models/config_section.py"} <= names
