"""Accuracy without labels (NannyML's confidence-based performance estimation): on the eval split, where labels are
known, learn how often an answer of each confidence is right (isotonic regression, so the mapping only rises);
a window's expected accuracy is then the mean of its answers' calibrated chances of being right.

The interval adds two uncertainties: the window's own (each answer right or wrong by its chance: a Poisson binomial)
and the calibration's (the estimate over bootstrap resamples of the eval split). It holds while the traffic's
confidence means what it meant on the eval split: under strong drift the estimate says what the model believes,
which is why it is reported beside the drift checks, not instead of them.
"""

from __future__ import annotations

import dataclasses

import numpy as np

BOOTSTRAPS = 20


@dataclasses.dataclass(frozen=True)
class AccuracyEstimate:
    value: float
    low: float
    high: float
    eval_accuracy: float  # measured where the calibration was learnt

    def line(self) -> str:
        return (
            f"estimated accuracy {self.value:.2f} ({self.low:.2f}-{self.high:.2f}), from the answers' confidence "
            f"calibrated on the eval split (accuracy there {self.eval_accuracy:.2f})"
        )


def _calibration(confidence: np.ndarray, right: np.ndarray):
    from sklearn.isotonic import IsotonicRegression

    return IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(confidence, right)


def estimate_accuracy(
    eval_probabilities: np.ndarray, eval_labels: np.ndarray, window_probabilities: np.ndarray, seed: int = 0
) -> AccuracyEstimate:
    """The window's expected accuracy and a 95% interval, from eval answers whose labels are known."""
    confidence, right = eval_probabilities.max(axis=1), (eval_probabilities.argmax(axis=1) == eval_labels)
    served = window_probabilities.max(axis=1)
    chances = _calibration(confidence, right.astype(float)).predict(served)
    value = float(chances.mean())
    own = float(np.sum(chances * (1 - chances))) / len(chances) ** 2
    draw = np.random.default_rng(seed)
    resampled = []
    for _ in range(BOOTSTRAPS):
        rows = draw.integers(0, len(confidence), len(confidence))
        resampled.append(_calibration(confidence[rows], right[rows].astype(float)).predict(served).mean())
    spread = 1.96 * np.sqrt(own + float(np.var(resampled)))
    return AccuracyEstimate(value, max(0.0, value - spread), min(1.0, value + spread), float(right.mean()))
