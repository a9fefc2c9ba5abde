"""What the CPU computes natively, read from /proc/cpuinfo without starting TensorFlow (the serving and scoring
commands decide their precision before TensorFlow loads: its oneDNN switch is read once, at import)."""

from __future__ import annotations

from pathlib import Path

BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")  # the instructions that compute bf16 natively (Sapphire Rapids, Zen 4)


def cpu_supports_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    try:
        flags = cpuinfo.read_text()
    except OSError:
        return False
    return any(flag in flags.split() for flag in BF16_CPU_FLAGS)
