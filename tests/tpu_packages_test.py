"""The TPU Trainer's package set (tpu-requirements.txt: TensorFlow 2.20 for TPU, tensorflow-text / tf-keras
2.20, libtpu) trains and exports with our code, and what it exports loads where TF Serving would load it.

The TPU image cannot run the lock's TensorFlow 2.21 (PyPI has no TPU build of it), so it swaps the TensorFlow
family (Dockerfile target tpu, bin/install-tpu-packages). This runs a whole tiny pipeline, Transform, Trainer
and Evaluator included, in a venv built the same way, on the CPU (TPU_LOAD_LIBRARY=0: libtpu otherwise waits
for TPU chips at `import tensorflow`), then checks the pushed model in a fresh process of the lock's TF 2.21.
Slow (a 330 MB package set and a whole run): `make test-all`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.tiny_model import tiny_run_command, write_tiny_bert

pytestmark = [pytest.mark.slow, pytest.mark.e2e]
ROOT = Path(__file__).resolve().parents[1]


def tpu_venv_env(venv: Path) -> dict[str, str]:
    """The variables the Dockerfile's tpu target sets, with libtpu not loaded (no TPU chips here): neither as a
    library (TPU_LOAD_LIBRARY=0) nor as the PJRT plugin (TF_PLUGGABLE_DEVICE_LIBRARY_PATH empty)."""
    return {
        **os.environ,
        "VIRTUAL_ENV": str(venv),
        "PATH": f"{venv / 'bin'}:{os.environ['PATH']}",
        "NEXT_PLUGGABLE_DEVICE_USE_C_API": "true",
        "TF_PLUGGABLE_DEVICE_LIBRARY_PATH": "",
        "TPU_LOAD_LIBRARY": "0",
    }


def test_the_tpu_package_set_trains_exports_and_serves(tmp_path):
    if sys.version_info[:2] != (3, 13):
        pytest.skip("tpu-requirements.txt pins the image's Python 3.13 wheels")
    built = subprocess.run(
        [ROOT / "bin" / "tpu-venv", sys._base_executable], capture_output=True, text=True, timeout=1800
    )
    assert built.returncode == 0, built.stderr[-3000:]
    venv = Path(built.stdout.strip().splitlines()[-1])
    env = tpu_venv_env(venv)
    python = str(venv / "bin" / "python")
    probe = "import tensorflow as tf, tensorflow_text as t, tf_keras as k, transformers as h; "
    probe += "print(tf.__version__, t.__version__, k.__version__, h.__version__.split('.')[0])"
    versions = subprocess.run([python, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert versions.stdout.split() == ["2.20.0", "2.20.1", "2.20.1", "5"]
    doctor = subprocess.run([python, "-m", "pipeline.cli", "doctor"], env=env, capture_output=True, text=True)
    assert doctor.returncode == 0, doctor.stdout[-3000:]
    assert "2.20.0 (tensorflow-tpu)" in doctor.stdout

    model = write_tiny_bert(tmp_path / "tiny-bert")
    summary = tmp_path / "summary.json"
    command = tiny_run_command(model, tmp_path, "--summary-json", str(summary), python=python)
    run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    result = json.loads(summary.read_text())
    assert result["blessed"] is True, result
    assert set(result["component_states"].values()) == {"done"}, result["component_states"]
    assert result["split_counts"]["train"] > 0 and result["metrics"]["example_count"] > 0, result

    # TF Serving's side: the export loads in a fresh process of the lock's TensorFlow 2.21 (TF and TF.Text
    # only), its op audit passes and its warm-up requests replay.
    served = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "serve-check", result["pushed_dir"]],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert served.returncode == 0, served.stdout[-2000:] + served.stderr[-2000:]
