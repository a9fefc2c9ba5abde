"""A REST body answered the way TF Serving would: `hftfx serve-check` in a fresh process (tensorflow and
tensorflow_text loaded, nothing of the run's process), as the e2e scenarios ask their pushed models."""

from __future__ import annotations

import json
import subprocess
import sys

# `hftfx serve` and `predict` where the answers are compared with the SavedModel's fp32 ones: under --precision auto a
# CPU with native bf16 (AVX512-BF16, AMX) serves bf16, 1e-4 to 1e-2 away (the auto path: pipeline_e2e_test)
FP32 = ("--precision", "fp32")


def serve_check(pushed_dir: str, request: dict) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "serve-check", pushed_dir, "--request", json.dumps(request)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    return done


def ask(pushed_dir: str, request: dict) -> dict:
    """The response body (the request is the user's: answered whole)."""
    (line,) = [x for x in serve_check(pushed_dir, request).stdout.splitlines() if x.startswith("response:")]
    return json.loads(line.removeprefix("response:").strip())


def predict_line(pushed_dir: str, text: str) -> str:
    """The line `hftfx predict` prints for one text, run as a user runs it."""
    done = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "predict", "--model", pushed_dir, *FP32, text],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    (line,) = [x for x in done.stdout.splitlines() if text in x]
    return line
