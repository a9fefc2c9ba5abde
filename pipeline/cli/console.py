"""TensorFlow's start-up chatter kept off the terminal of a CPU machine.

TF 2.21 writes its device probing (no CUDA driver, failed cuInit), oneDNN and CPU-feature notes to stderr
before absl's logging is initialized, where TF_CPP_MIN_LOG_LEVEL does not reach them: every CPU run would open
with a GPU error it does not have. Hand-written because TF offers no switch for those lines: stderr's file
descriptor goes through a pipe that drops exactly them (its children, the Beam workers, inherit it), and only
where no NVIDIA device exists and --verbose was not asked for.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading

STARTUP_CHATTER = re.compile(
    r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|[IWE]\d{4} [\d:.]+\s+\d+ (cudart_stub|cuda_platform|cuda_executor|cuda_diagnostics|port|cpu_feature_guard)"
    r"\.cc:\d+\]"
    r"|To enable the following instructions: .* rebuild TensorFlow with the appropriate compiler flags\."
)


def has_nvidia_device() -> bool:
    return os.path.exists("/dev/nvidia0") or os.path.exists("/proc/driver/nvidia/version")


@contextlib.contextmanager
def without_startup_chatter():
    """While the block runs, lines of STARTUP_CHATTER written to fd 2 (by any thread or child) are dropped."""
    if has_nvidia_device():
        yield
        return
    sys.stderr.flush()
    terminal = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)

    def forward() -> None:
        with os.fdopen(read_end, "rb") as pipe:
            for line in pipe:
                if not STARTUP_CHATTER.match(line.decode("utf-8", "replace")):
                    os.write(terminal, line)

    forwarder = threading.Thread(target=forward, name="stderr-filter", daemon=True)
    forwarder.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(terminal, 2)  # closes the pipe's last write end this process holds: the forwarder drains, ends
        forwarder.join(timeout=5)
        os.close(terminal)
