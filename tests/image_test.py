"""The pipeline image, built with podman and run as Vertex AI or Kubeflow would run it (bin/check-image).

Slow (the image is about 4 GB, and podman's vfs storage copies it whole): `make image` builds and checks
it; under `make test-all` this runs where podman is reachable from the test process, building the image
first when it is missing. Inside the Debian 13 userland (hosts older than glibc 2.38) podman is not
reachable, and the test says so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.e2e]
ROOT = Path(__file__).resolve().parents[1]
IMAGE = os.environ.get("HFTFX_IMAGE", "localhost/hftfx-pipeline:dev")


def test_the_image_builds_and_passes_its_checks():
    if shutil.which("podman") is None or shutil.which("runc") is None:
        pytest.skip("podman/runc not reachable from this process: run `make image` on the host")
    subprocess.run([ROOT / "bin" / "build-image", IMAGE], check=True, timeout=3600)
    done = subprocess.run([ROOT / "bin" / "check-image", IMAGE], capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "passed its checks" in done.stdout


def test_a_build_short_of_disk_stops_before_building_and_says_what_to_free():
    if shutil.which("podman") is None or shutil.which("runc") is None:
        pytest.skip("podman/runc not reachable from this process: run `make image` on the host")
    done = subprocess.run(
        [ROOT / "bin" / "build-image", "localhost/hftfx-never-built:test"],
        env={**os.environ, "HFTFX_IMAGE_MIN_FREE_GB": str(10**6)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode != 0
    assert "GB free under" in done.stderr and "HFTFX_IMAGE_MIN_FREE_GB" in done.stderr, done.stderr
    assert "building localhost/hftfx-never-built:test" not in done.stderr
