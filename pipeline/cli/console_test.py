"""TensorFlow's start-up lines are dropped from stderr on a machine without a GPU; everything else passes."""

import subprocess
import sys

import pytest

from pipeline.cli.console import STARTUP_CHATTER, has_nvidia_device

SAMPLE = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795616248.353072   18449 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will "
    "not be used.",
    "E0000 00:00:1795616252.057144   18449 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: Failed "
    "call to cuInit: UNKNOWN ERROR (303)",
    "I0000 00:00:1795615534.796679   13071 port.cc:153] oneDNN custom operations are on. You may see slightly "
    "different numerical results due to floating-point round-off errors from different computation orders.",
    "To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild TensorFlow with the "
    "appropriate compiler flags.",
]


def test_the_pattern_takes_the_start_up_lines_and_nothing_else():
    assert all(STARTUP_CHATTER.match(line) for line in SAMPLE)
    for kept in ("[Trainer] step 25/320", "E0000 00:00:1.0   1 saved_model_loader.cc:3] could not load", "Traceback"):
        assert not STARTUP_CHATTER.match(kept)


@pytest.mark.skipif(has_nvidia_device(), reason="the filter stays off where a GPU exists")
def test_a_process_importing_tensorflow_under_the_filter_shows_only_its_own_stderr():
    script = (
        "import os, sys; os.environ['TF_USE_LEGACY_KERAS'] = '1'\n"
        "from pipeline.cli.console import without_startup_chatter\n"
        "with without_startup_chatter():\n"
        "    import tensorflow as tf; tf.constant(1.0) + 1\n"
        "    print('our own line', file=sys.stderr)\n"
    )
    bare = subprocess.run(
        [sys.executable, "-c", script.replace("with without_startup_chatter():", "if True:")],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    filtered = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    if "cuda" not in bare.stderr.lower():
        pytest.skip("this TensorFlow build prints no CUDA probing: nothing to filter")
    assert "cuda" not in filtered.stderr.lower() and "oneDNN" not in filtered.stderr
    assert "our own line" in filtered.stderr
