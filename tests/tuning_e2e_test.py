"""A Tuner before the Trainer under LocalDagRunner with the tiny BERT: TFX's Tuner runs the trials (KerasTuner's
Bayesian oracle, each trial the Trainer's own training stopped early), writes the best trial's values, and the
Trainer trains with them: ML Metadata records the HyperParameters artifact as the Trainer's input, the Trainer's
record holds the same values, and the summary and the report show the trials."""

import json
from pathlib import Path

import pytest
from ml_metadata.proto import metadata_store_pb2

from components.publisher.model_card import parse_card
from pipeline.config import pipeline_config
from pipeline.orchestration.local_runner import run_local
from pipeline.reporting.metadata_reader import node_name, open_store
from pipeline.reporting.report import build_report
from tests.tiny_model import tiny_overrides

pytestmark = pytest.mark.e2e

TRIALS = 2


@pytest.fixture(scope="module")
def tuned_run(tmp_path_factory, tiny_bert_dir):
    workdir = tmp_path_factory.mktemp("tuning")
    overrides = {
        **tiny_overrides(workdir, tiny_bert_dir, 32),
        "dataset.limits": {"train": 192, "eval": 64, "test": 64},
        "tuning": {
            "trials": TRIALS,
            "search": {"learning_rate": {"min": 1e-5, "max": 3e-3}, "batch_size": [8, 16], "epochs": [1, 2]},
        },
    }
    config = pipeline_config.load_config(overrides=overrides)
    return config, run_local(config)


def test_the_tuner_runs_its_trials_and_the_summary_shows_them(tuned_run):
    _, summary = tuned_run
    states = {c.name: c.state for c in summary.components}
    assert states["Tuner"] == "done" and states["Trainer"] == "done"
    assert len(summary.trials) == TRIALS
    scores = [t["score"] for t in summary.trials]
    assert scores == sorted(scores)  # best (lowest eval loss) first
    for trial in summary.trials:
        assert 1e-5 <= trial["learning_rate"] <= 3e-3 and trial["batch_size"] in (8, 16) and trial["epochs"] in (1, 2)
    rendered = summary.render()
    assert f"  tuning        {TRIALS} trial(s), best first" in rendered and "    trial " in rendered


def test_the_trainer_trains_with_the_best_trials_values_as_ml_metadata_records(tuned_run):
    config, summary = tuned_run
    best = {k: v for k, v in summary.trials[0].items() if k not in ("trial_id", "score")}
    assert summary.training.tuned == best
    assert "  tuned         the Trainer trained with the best trial's batch_size " in summary.render()
    assert f"learning_rate {best['learning_rate']:.3g}" in summary.render()
    store = open_store(config.metadata_sqlite)
    executions = {node_name(store, e, config.pipeline_name): e for e in store.get_executions()}
    inputs = [
        e.artifact_id
        for e in store.get_events_by_execution_ids([executions["Trainer"].id])
        if e.type == metadata_store_pb2.Event.INPUT
    ]
    (hyperparameters,) = [a for a in store.get_artifacts_by_id(inputs) if a.type == "HyperParameters"]
    written = json.loads((Path(hyperparameters.uri) / "best_hyperparameters.txt").read_text())
    assert written["values"] == best
    produced = [
        e.artifact_id
        for e in store.get_events_by_execution_ids([executions["Tuner"].id])
        if e.type == metadata_store_pb2.Event.OUTPUT
    ]
    assert hyperparameters.id in produced
    assert summary.training.epochs == best["epochs"]  # the tuned maximum, not the config's


def test_the_model_card_gives_the_values_training_used_not_the_configs(tuned_run):
    config, summary = tuned_run
    best = summary.training.tuned
    card = parse_card((Path(summary.hf_model_dir) / "README.md").read_text()).text
    assert f"learning rate {best['learning_rate']}," in card and f"batch size {best['batch_size']}," in card
    assert f"epochs {best['epochs']}," in card and "the Tuner's best trial chose" in card
    assert f"learning rate {config.training.learning_rate}," not in card  # the config's value, untuned
    assert summary.recipe.startswith(f"learning rate {best['learning_rate']:g}, ")  # the Trainer's, not the preflight's
    assert "learning rate from the Tuner's best trial" in summary.recipe


def test_the_report_shows_the_trials_table(tuned_run, tmp_path):
    config, _ = tuned_run
    page = build_report(config.metadata_sqlite, config.pipeline_name, tmp_path / "report.html").read_text()
    assert f"The Tuner's {TRIALS} trial(s), best first" in page
    assert "<th>learning_rate</th>" in page
