"""The precision a server or a scoring job computes in: fp32, or bf16 through oneDNN's graph rewrite of the same
SavedModel at load time, so the export (TF Serving's view of it) stays fp32 and unchanged.

The rewrite (grappler's auto_mixed_precision_onednn_bfloat16) turns the matmuls and the elementwise ops between them
(GELU, softmax, LayerNorm's statistics) to bf16 with fp32 accumulation, and keeps Exp, Pow and the outputs in fp32.
It runs only where TensorFlow's oneDNN ops are on, which TensorFlow reads once, at import, from TF_ENABLE_ONEDNN_OPTS:
so the choice is made before TensorFlow loads, and TensorFlow is imported inside the functions that need it.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Sequence

from models.errors import UserError
from models.hardware.cpu_features import BF16_CPU_FLAGS, cpu_supports_bf16

SERVING_PRECISIONS = ("auto", "fp32", "bf16")
ONEDNN_SWITCH = "TF_ENABLE_ONEDNN_OPTS"
BF16_REWRITE = "auto_mixed_precision_onednn_bfloat16"
# bf16 keeps 8 bits of mantissa, so its answers move: on the default model's 2,000 last reviews by at most 0.020 (99th
# percentile 0.012) with 99.9% of labels equal, whether or not softmax and LayerNorm's statistics stay fp32. A warm-up
# answer moved further than this means the rewrite broke the model: bf16 is dropped.
BF16_DRIFT_LIMIT = 0.05


@dataclasses.dataclass(frozen=True)
class ServingPrecision:
    precision: str  # fp32 | bf16
    reason: str
    auto: bool = False  # chosen by auto: where bf16 cannot run, fp32 instead of a refusal

    def describe(self) -> str:
        return f"{self.precision} ({self.reason})"


class PrecisionUnavailable(UserError, RuntimeError):
    """bf16 was asked for where TensorFlow cannot rewrite the model to it."""


def choose_serving_precision(requested: str, native_bf16: bool | None = None) -> ServingPrecision:
    """auto: bf16 on CPUs that compute it natively (AVX512-BF16, AMX), fp32 elsewhere; fp32 or bf16 when asked
    (bf16 on other CPUs is emulated, slower than fp32: said in the reason, not refused, so it can be compared)."""
    native = cpu_supports_bf16() if native_bf16 is None else native_bf16
    flags = " or ".join(BF16_CPU_FLAGS)
    if requested == "fp32":
        return ServingPrecision("fp32", "asked for")
    if requested == "bf16":
        if native:
            return ServingPrecision("bf16", "asked for, native on this CPU")
        return ServingPrecision("bf16", f"asked for; emulated here, slower than fp32: this CPU has no {flags}")
    if requested != "auto":
        raise UserError(f"precision '{requested}' is not one of {', '.join(SERVING_PRECISIONS)}")
    if native:
        return ServingPrecision("bf16", "auto: this CPU computes bf16 natively", auto=True)
    return ServingPrecision("fp32", f"auto: this CPU has no {flags}, so bf16 would be emulated and slower", auto=True)


def prepare_process(choice: ServingPrecision, environ=os.environ) -> ServingPrecision:
    """The choice, with TensorFlow's oneDNN ops turned on for bf16 before TensorFlow loads (they are on by default
    only on some CPUs). Where they cannot be (the user turned them off, or TensorFlow already loaded without them)
    bf16 asked for is refused, and bf16 chosen by auto becomes fp32, saying why."""
    if choice.precision != "bf16":
        return choice
    try:
        _turn_onednn_on(environ)
    except PrecisionUnavailable as error:
        if not choice.auto:
            raise
        return ServingPrecision("fp32", f"auto: {error}", auto=True)
    return choice


def _turn_onednn_on(environ) -> None:
    if environ.get(ONEDNN_SWITCH, "1") in ("0", "false", "False"):
        raise PrecisionUnavailable(
            f"bf16 needs TensorFlow's oneDNN ops, and {ONEDNN_SWITCH}={environ[ONEDNN_SWITCH]} turns them off: unset "
            "it, or serve with --precision fp32"
        )
    environ[ONEDNN_SWITCH] = "1"
    if "tensorflow" in sys.modules and not _onednn_on():
        raise PrecisionUnavailable(
            "bf16 needs TensorFlow's oneDNN ops, which this process loaded without: choose the precision before "
            "TensorFlow is imported (hftfx serve and predict do)"
        )


def apply_precision(
    choice: ServingPrecision, probabilities: Callable[[], Sequence[Sequence[float]]]
) -> ServingPrecision:
    """Switches the loaded model's functions to bf16 when chosen, if its answers to `probabilities` (the warm-up
    texts) stay within BF16_DRIFT_LIMIT of fp32's, no label changing where fp32's leads by more; else back to fp32,
    saying why."""
    if choice.precision != "bf16":
        return choice
    import numpy as np

    if not _onednn_on():
        raise PrecisionUnavailable("bf16 needs TensorFlow's oneDNN ops: call prepare_process before TensorFlow loads")
    fp32 = np.asarray(probabilities())
    _rewrite_to_bf16(True)
    bf16 = np.asarray(probabilities())
    gap = float(np.abs(fp32 - bf16).max(initial=0.0))
    ranked = np.sort(fp32, axis=-1)
    clear = ranked[..., -1] - ranked[..., -2] > BF16_DRIFT_LIMIT  # a lead bf16's drift cannot overturn
    if gap <= BF16_DRIFT_LIMIT and (fp32.argmax(-1) == bf16.argmax(-1))[clear].all():
        return dataclasses.replace(choice, reason=f"{choice.reason}; warm-up answers within {gap:.4f} of fp32's")
    _rewrite_to_bf16(False)
    return ServingPrecision(
        "fp32", f"bf16 moved the warm-up answers by {gap:.4f} (limit {BF16_DRIFT_LIMIT}) or overturned a clear label"
    )


def _rewrite_to_bf16(on: bool) -> None:
    """Grappler's options are part of a function's cache key: calls after this one run a rewritten graph."""
    import tensorflow as tf

    tf.config.optimizer.set_experimental_options({BF16_REWRITE: on})


def _onednn_on() -> bool:
    from tensorflow.python.util import _pywrap_util_port

    return bool(_pywrap_util_port.IsMklEnabled())
