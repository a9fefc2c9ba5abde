"""Retraining for real: spans arrive one by one and `hftfx trigger` runs the whole pipeline for each.

One scenario (a module fixture) drives real LocalDagRunner runs on one pipeline root and ML Metadata sqlite:
no span -> nothing; span 1 -> a run (span 2, still without its ready marker, does not count); the same
trigger again -> nothing; span 2's marker lands and two `hftfx trigger run` processes start together -> one
run; a live lock holder is respected and, SIGKILLed, blocks nothing; span 3 with shuffled labels -> a run
whose model is worse on the fixed test set, so it is not blessed and the serving dir keeps the previous
version. Three runs in all. Drift is then measured against that history.

The pretrained MiniLM is fine-tuned here, not the tiny random BERT of the other e2e tests: 17 steps give it
test AUC 1.0 on these spans, while the tiny BERT's AUC wandered between 0.36 and 0.98 from span to span,
which would make "a worse model is not blessed" a coin toss.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
import yaml

from pipeline.config import pipeline_config
from pipeline.reporting.metadata_reader import summarize_all
from pipeline.retraining import local_trigger
from tests import span_data

# Five minutes of real-model runs: `make test-all` runs it; `make test` (CI) covers the trigger rules with
# pipeline/retraining/*_test.py and the cloud side with pipeline/retraining/events_test.py and vertex_test.py.
pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SPAN_ROWS, TEST_ROWS = 320, 160


def retraining_overrides(workdir, data_dir) -> dict:
    return {
        "pipeline_root": str(workdir / "pipeline"),
        "serving_dir": str(workdir / "serving"),
        "model": {"max_seq_length": 32},  # the packaged pretrained MiniLM
        "dataset": {
            "name": "csv",
            "split_files": {"train": [f"{data_dir}/span-{{SPAN}}/*.csv"], "test": [str(workdir / "golden.csv")]},
            "split_sources": {"train": "train", "eval": "validation", "test": "test"},
            "label_names": ["rotten", "fresh"],
            "ready_marker": "_SUCCESS",
        },
        "training": {"batch_size": 16, "learning_rate": 1e-4},
        "evaluation": {"min_accuracy": 0.0, "min_auc": 0.0, "max_auc_regression": 0.0},
    }


def trigger_processes(config_file, count):
    command = [sys.executable, "-m", "pipeline.cli", "trigger", "run", "--config", str(config_file)]
    return [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(count)
    ]


def serving_versions(config):
    base = config.push_base_directory
    return sorted(v for v in os.listdir(base) if v.isdigit()) if os.path.isdir(base) else []


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("retraining")
    data_dir = workdir / "data"
    span_data.write_csv(workdir / "golden.csv", span_data.reviews(TEST_ROWS, seed=1000))
    overrides = retraining_overrides(workdir, data_dir)
    config_file = workdir / "retraining.yaml"
    config_file.write_text(yaml.safe_dump(overrides))
    config = pipeline_config.load_config(config_file)
    seen = {"before_any_span": local_trigger.check(config)}

    span_data.write_span(data_dir, 1, span_data.reviews(SPAN_ROWS, seed=1))
    span_data.write_span(data_dir, 2, span_data.reviews(SPAN_ROWS, seed=2), marker="")  # still uploading
    seen["span_1"] = local_trigger.trigger_run(config)
    seen["span_1_again"] = local_trigger.trigger_run(config)

    (data_dir / "span-2" / "_SUCCESS").write_text("")
    racers = trigger_processes(config_file, 2)
    seen["span_2_outputs"] = [p.communicate(timeout=900)[0] for p in racers]
    seen["span_2_codes"] = [p.returncode for p in racers]
    seen["versions_before_span_3"] = serving_versions(config)

    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import time
            from pipeline.orchestration.root_lock import pipeline_root_lock
            with pipeline_root_lock({config.pipeline_root!r}):
                print("locked", flush=True)
                time.sleep(600)
        """)],
        stdout=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    assert holder.stdout.readline().strip() == "locked"
    seen["while_locked"] = local_trigger.trigger_run(config)
    os.killpg(holder.pid, signal.SIGKILL)
    holder.wait()

    worse = span_data.shuffled_labels(span_data.reviews(SPAN_ROWS, seed=4), seed=4)
    span_data.write_span(data_dir, 3, worse)
    seen["span_3"] = local_trigger.trigger_run(config)
    seen["versions_after_span_3"] = serving_versions(config)
    seen["runs"] = summarize_all(config.metadata_sqlite, config.pipeline_name)
    return config, seen


def test_no_span_no_run_and_an_incomplete_span_does_not_count(scenario):
    _, seen = scenario
    assert seen["before_any_span"].action == "skip"
    assert seen["before_any_span"].reason == "no span of data exists yet"
    first = seen["span_1"]
    assert (first.decision.action, first.decision.span) == ("train", 1)  # span 2 had no _SUCCESS marker yet
    assert first.summary.blessed and first.summary.pushed_version


def test_the_same_trigger_again_starts_nothing(scenario):
    _, seen = scenario
    again = seen["span_1_again"]
    assert again.summary is None and again.decision.action == "skip"
    assert again.decision.reason.startswith("span 1 was already trained by run ")


def test_two_triggers_fired_together_start_one_run(scenario):
    _, seen = scenario
    assert seen["span_2_codes"] == [0, 0], seen["span_2_outputs"]
    started = [out for out in seen["span_2_outputs"] if "[trigger] train: span 2 is new" in out]
    assert len(started) == 1, seen["span_2_outputs"]
    (other,) = [out for out in seen["span_2_outputs"] if out not in started]
    assert "another run holds the pipeline root" in other or "span 2 was already trained" in other, other


def test_a_live_lock_holder_is_respected_and_a_killed_one_blocks_nothing(scenario):
    _, seen = scenario
    assert seen["while_locked"].summary is None
    assert "another run holds the pipeline root" in seen["while_locked"].decision.reason
    assert seen["span_3"].summary is not None  # the holder was SIGKILLed: its lock died with it


def test_exactly_one_run_per_span_recorded_in_ml_metadata(scenario):
    _, seen = scenario
    runs = seen["runs"]
    assert [r.spans for r in runs] == [[1], [2], [3]]
    assert [r.outcome for r in runs] == ["complete"] * 3
    assert all(r.span == r.spans[-1] for r in runs)


def test_a_worse_retrain_is_not_blessed_and_serving_keeps_the_previous_version(scenario):
    _, seen = scenario
    worse = seen["span_3"].summary
    assert worse.blessed is False
    assert "auc change vs. the blessed baseline -" in worse.blessing_reason
    assert "(needs absolute change >= 0, 95% interval [-" in worse.blessing_reason  # worse beyond the noise
    assert worse.metrics["auc"] < worse.baseline_metrics["auc"]
    assert worse.pushed_version is None
    assert seen["versions_after_span_3"] == seen["versions_before_span_3"]
    assert seen["versions_before_span_3"], "the good spans pushed at least one version"


def test_runs_lists_spans_metrics_blessing_and_pushed_versions(scenario):
    config, _ = scenario
    done = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "runs", "--set", f"pipeline_root={config.pipeline_root}"],
        capture_output=True, text=True, timeout=600, check=True,
    )  # fmt: skip
    assert "deprecat" not in (done.stdout + done.stderr).lower(), done.stderr[-2000:]  # nothing above the table
    lines = done.stdout.strip().splitlines()
    assert lines[0].split()[:3] == ["run", "started", "(UTC)"]
    rows = lines[1:]
    assert len(rows) == 3
    assert [row.split()[3] for row in rows] == ["1", "2", "3"]
    assert "no" in rows[2].split() and rows[2].rstrip().endswith("-")  # span 3: not blessed, nothing pushed
    assert "version" in rows[0]


# --- drift, measured against the blessed model's training data in the scenario's ML Metadata -----------------


def drift_decision(scenario, tmp_path, rows):
    config, _ = scenario
    data_dir = tmp_path / "incoming"
    span_data.write_span(data_dir, 5, rows)
    split_files = {**config.dataset.split_files, "train": (f"{data_dir}/span-{{SPAN}}/*.csv",)}
    drifting = config.model_copy(
        update={
            "dataset": config.dataset.model_copy(update={"split_files": split_files}),
            "retraining": config.retraining.model_copy(update={"policy": "drift"}),
        }
    )
    return local_trigger.check(drifting)


def test_a_span_from_the_same_distribution_does_not_trigger(scenario, tmp_path):
    chosen = drift_decision(scenario, tmp_path, span_data.reviews(SPAN_ROWS, seed=50))
    assert chosen.action == "skip", chosen.reason
    assert "has not drifted" in chosen.reason
    assert not chosen.drift.drifted
    assert {f.feature for f in chosen.drift.features} == {"label_name", "text_length", "token_count"}


def test_a_span_with_shifted_label_balance_triggers_and_names_the_feature(scenario, tmp_path):
    chosen = drift_decision(scenario, tmp_path, span_data.reviews(SPAN_ROWS, seed=51, fresh_share=0.9))
    assert chosen.action == "train"
    drifted = {f.feature: f for f in chosen.drift.features if f.drifted}
    assert set(drifted) == {"label_name"}
    assert drifted["label_name"].distance == pytest.approx(0.4, abs=0.05)
    assert f"label_name L-infinity {drifted['label_name'].distance:.3f} > 0.1" in chosen.reason
    assert chosen.drift.baseline_run  # the blessed run whose data was compared


def test_a_span_with_longer_texts_triggers_on_length(scenario, tmp_path):
    chosen = drift_decision(scenario, tmp_path, span_data.reviews(SPAN_ROWS, seed=52, words=(30, 40)))
    assert chosen.action == "train"
    drifted = {f.feature for f in chosen.drift.features if f.drifted}
    assert drifted == {"text_length", "token_count"}
    assert "text_length Jensen-Shannon" in chosen.reason


def test_trigger_check_cli_prints_the_distances(scenario, tmp_path):
    config, _ = scenario
    data_dir = tmp_path / "incoming"
    span_data.write_span(data_dir, 5, span_data.reviews(SPAN_ROWS, seed=53, fresh_share=0.9))
    split_files = json.dumps(
        {"train": [f"{data_dir}/span-{{SPAN}}/*.csv"], "test": [config.dataset.split_files["test"][0]]}
    )
    out = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "trigger", "check", "--drift",
         "--set", f"pipeline_root={config.pipeline_root}",
         "--set", "dataset.name=csv", "--set", f"dataset.split_files={split_files}",
         "--set", "dataset.split_sources={train: train, eval: validation, test: test}",
         "--set", "dataset.label_names=[rotten, fresh]"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert "decision:  train span 5" in out.stdout
    assert "label_name   L-infinity" in out.stdout and "DRIFT" in out.stdout
