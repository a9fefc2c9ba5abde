"""What this machine's matrix multiplications reach in TensorFlow, measured in a couple of seconds.

Seconds do not travel between machines (these differ 2.5x); a ratio to the peak measured in the same run
does. The Trainer, `hftfx doctor` and `make bench` all measure it with `matmul_peak`.
"""

from __future__ import annotations

import dataclasses
import time

SIZE = 1024  # square operands: big enough for the BLAS kernel's full speed, small enough for short windows
WINDOWS = 5  # the best of several short windows, so a burst of other work on the machine counts less


@dataclasses.dataclass(frozen=True)
class MatmulPeak:
    dtype: str
    gflops: float  # 10^9 floating-point operations per second, a multiply-add counted as 2
    device: str

    def describe(self) -> str:
        return f"{self.dtype} matmul peak {self.gflops:,.0f} GFLOP/s on {self.device}"


def matmul_peak(dtype: str = "float32", seconds: float = 2.0, device: str | None = None) -> MatmulPeak:
    """Best GFLOP/s of back-to-back SIZE x SIZE matmuls over WINDOWS windows of seconds / WINDOWS each."""
    import tensorflow as tf

    device = device or ("/GPU:0" if tf.config.list_logical_devices("GPU") else "/CPU:0")
    with tf.device(device):
        a = tf.cast(tf.random.stateless_normal([SIZE, SIZE], seed=[0, 0]), dtype)
        b = tf.cast(tf.random.stateless_normal([SIZE, SIZE], seed=[0, 1]), dtype)
        tf.linalg.matmul(a, b).numpy()  # first call: kernel selection, thread pool start
        best = 0.0
        for _ in range(WINDOWS):
            count, started = 0, time.perf_counter()
            while True:
                product = tf.linalg.matmul(a, b)
                count += 1
                if time.perf_counter() - started >= seconds / WINDOWS:
                    break
            product.numpy()  # the last result is there: every queued product is done
            best = max(best, 2 * SIZE**3 * count / (time.perf_counter() - started) / 1e9)
    return MatmulPeak(dtype=dtype, gflops=best, device=device)
