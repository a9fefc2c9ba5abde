"""The served default model goes stale and the monitor says so before any label arrives (issue #80's scenario):
the default run (the packaged MiniLM fine-tuned on Rotten Tomatoes, no flags), served with every row logged; its
held-out test reviews are no drift, with accuracy estimated without labels within 0.03 of the Evaluator's; the same
reviews in another script are drift. Twenty minutes on a 2-core machine: behind the `slow` marker."""

import json

import pytest

from pipeline.config import pipeline_config
from pipeline.orchestration.local_runner import run_local
from tests import monitored_serving

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("default")
    overrides = {"pipeline_root": str(workdir / "pipeline"), "serving_dir": str(workdir / "serving")}
    config = pipeline_config.load_config(overrides=overrides)
    return config, run_local(config)


def test_held_out_reviews_are_no_drift_with_accuracy_estimated_within_003_and_another_script_is_drift(
    default_run, tmp_path
):
    config, summary = default_run
    reviews = monitored_serving.split_texts(summary.examples_uri, "test")
    monitored_serving.served_and_logged(summary.pushed_dir, tmp_path / "held-out", reviews)
    shifted_texts = monitored_serving.in_cyrillic(reviews)
    monitored_serving.served_and_logged(summary.pushed_dir, tmp_path / "shifted", shifted_texts)

    held_out = monitored_serving.monitored(config, tmp_path / "held-out", "--json", str(tmp_path / "held-out.json"))
    shifted = monitored_serving.monitored(config, tmp_path / "shifted")
    print(held_out.stdout, shifted.stdout)
    assert held_out.returncode == 0 and shifted.returncode == 0, held_out.stderr[-3000:] + shifted.stderr[-3000:]
    assert "verdict: no drift" in held_out.stdout
    estimate = json.loads((tmp_path / "held-out.json").read_text())["estimated_accuracy"]
    assert abs(estimate["value"] - summary.metrics["accuracy"]) <= 0.03, (estimate, summary.metrics)
    verdict = next(line for line in shifted.stdout.splitlines() if line.startswith("verdict: "))
    assert {"script", "texts (domain classifier)"} <= set(verdict.removeprefix("verdict: drift: ").split(", "))
