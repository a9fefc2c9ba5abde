"""Drift of K-class label distributions, measured by TFDV's own L-infinity comparator."""

import pytest

from pipeline.configs import RetrainingConfig
from pipeline.retraining import drift


def _profile(counts: dict[str, int]):
    labels = [name for name, n in counts.items() for _ in range(n)]
    texts = ["a review of some length"] * len(labels)
    return drift.profile(texts, labels, [5] * len(labels))


def test_three_class_label_shift_is_the_largest_share_change():
    baseline = _profile({"fresh ✓": 40, "rotten ✗": 40, "plot synopsis": 20})
    shifted = _profile({"fresh ✓": 20, "rotten ✗": 40, "plot synopsis": 40})  # fresh -0.2, plot +0.2
    features = {f.feature: f for f in drift.compare(baseline, shifted, RetrainingConfig())}
    label = features["label_name"]
    assert label.distance == pytest.approx(0.2, abs=1e-6)
    assert label.drifted  # above the default 0.1
    assert not features["text_length"].drifted


def test_a_class_that_appears_only_now_counts_as_drift():
    baseline = _profile({"fresh ✓": 50, "rotten ✗": 50})
    current = _profile({"fresh ✓": 40, "rotten ✗": 40, "plot synopsis": 20})
    label = {f.feature: f for f in drift.compare(baseline, current, RetrainingConfig())}["label_name"]
    assert label.distance == pytest.approx(0.2, abs=1e-6) and label.drifted
