import numpy as np

from pipeline.monitoring.accuracy_estimate import estimate_accuracy


def _answers(draw, confidence):
    """A calibrated binary classifier: it answers label 0 with `confidence`, and is right that often."""
    right = draw.random(len(confidence)) < confidence
    probabilities = np.stack([confidence, 1 - confidence], axis=1)
    return probabilities, np.where(right, 0, 1), right


def test_accuracy_is_estimated_within_003_of_the_truth_when_confidence_shifts():
    draw = np.random.default_rng(7)
    eval_probabilities, eval_labels, _ = _answers(draw, draw.uniform(0.5, 1.0, 4_000))
    # served traffic is harder than the eval split (less confident answers): accuracy falls from ~0.75 to ~0.6
    window_probabilities, _, right = _answers(draw, draw.uniform(0.5, 0.7, 2_000))
    estimate = estimate_accuracy(eval_probabilities, eval_labels, window_probabilities)
    assert abs(estimate.value - right.mean()) < 0.03, (estimate, right.mean())
    assert estimate.low <= right.mean() <= estimate.high
    assert abs(estimate.eval_accuracy - 0.75) < 0.03
    assert estimate.value < estimate.eval_accuracy - 0.1  # it says accuracy fell, without one label
    assert estimate.line().startswith(f"estimated accuracy {estimate.value:.2f} ({estimate.low:.2f}-")


def test_the_interval_narrows_with_the_window():
    draw = np.random.default_rng(3)
    eval_probabilities, eval_labels, _ = _answers(draw, draw.uniform(0.5, 1.0, 4_000))
    small = estimate_accuracy(eval_probabilities, eval_labels, _answers(draw, draw.uniform(0.5, 1, 100))[0])
    large = estimate_accuracy(eval_probabilities, eval_labels, _answers(draw, draw.uniform(0.5, 1, 5_000))[0])
    assert large.high - large.low < (small.high - small.low) / 2
