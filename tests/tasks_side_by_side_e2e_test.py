"""Several tasks in one pipeline root, under LocalDagRunner with the tiny BERT.

A binary run, then a 3-class run in the same root: the 3-class run is refused before any component while it
would replace the binary model under the same serving name; under its own serving name it runs as the first
of its task (no baseline, no TFMA crash). A second binary run then takes the first binary model as its
baseline, not the newer 3-class one.
"""

import pytest

from models.task import read_contract
from pipeline.config import pipeline_config
from pipeline.orchestration.local_runner import run_local
from pipeline.orchestration.preflight import ServingContractError
from pipeline.reporting.metadata_reader import open_store, summarize_all
from pipeline.reporting.run_summary import render_runs
from tests import user_datasets
from tests.tiny_model import tiny_overrides

pytestmark = pytest.mark.e2e


def config_for(workdir, model_dir, **overrides):
    base = {**tiny_overrides(workdir, model_dir, 32), "dataset.limits": {"train": 256, "eval": 64, "test": 96}}
    return pipeline_config.load_config(overrides={**base, **overrides})


@pytest.fixture(scope="module")
def history(tmp_path_factory, tiny_bert_dir):
    workdir = tmp_path_factory.mktemp("side-by-side")
    csv_path = user_datasets.write_three_class_csv(workdir / "data" / "kinds.csv", per_class=90)
    three_class = {"dataset.name": str(csv_path), "dataset.text_column": "review", "dataset.label_column": "kind"}
    binary = run_local(config_for(workdir, tiny_bert_dir))
    refused_config = config_for(workdir, tiny_bert_dir, **three_class)
    executions_before = len(open_store(refused_config.metadata_sqlite).get_executions())
    with pytest.raises(ServingContractError) as refused:
        run_local(refused_config)
    executions_after = len(open_store(refused_config.metadata_sqlite).get_executions())
    kinds = run_local(config_for(workdir, tiny_bert_dir, model_name="kinds", **three_class))
    # which baseline is chosen is the point here, not its intervals (20 s of jackknife): left out
    again = {"training.seed": 7, "evaluation.confidence_intervals": "never"}
    binary_again = run_local(config_for(workdir, tiny_bert_dir, **again))
    return {
        "config": refused_config,
        "binary": binary,
        "refused": str(refused.value),
        "executions": (executions_before, executions_after),
        "kinds": kinds,
        "binary_again": binary_again,
    }


def test_another_task_under_the_same_serving_name_is_refused_before_any_component(history):
    before, after = history["executions"]
    assert before == after  # nothing ran, nothing was recorded
    message = history["refused"]
    assert "serves single-label over text, labels ['rotten', 'fresh']" in message
    assert "label set ['rotten', 'fresh'] -> ['fresh ✓', 'plot synopsis', 'rotten ✗']" in message
    assert "model_name" in message and "replace_serving_contract=true" in message


def test_a_new_task_under_its_own_name_is_the_first_of_its_task(history):
    kinds = history["kinds"]
    assert kinds.outcome == "complete" and kinds.blessed is True and kinds.pushed_dir
    assert kinds.baseline_uri is None
    assert "first blessed model of this task" in kinds.render()
    contract = read_contract(kinds.pushed_dir)
    assert contract.task == "single_label" and len(contract.label_names) == 3


def test_the_next_binary_run_is_compared_with_the_binary_model_not_the_newer_three_class_one(history):
    binary, again = history["binary"], history["binary_again"]
    assert binary.blessed is True and binary.baseline_uri is None
    assert again.outcome == "complete" and again.baseline_uri is not None
    store = open_store(history["config"].metadata_sqlite)
    (baseline,) = [a for a in store.get_artifacts_by_type("Model") if a.uri == again.baseline_uri]
    assert baseline.custom_properties["task_key"].string_value == read_contract(binary.pushed_dir).key
    # The pipeline is recorded too, on the model and on every blessing: Vertex's baseline query filters on it.
    assert baseline.custom_properties["baseline_scope"].string_value == history["config"].pipeline_name
    blessings = store.get_artifacts_by_type("ModelBlessing")
    assert {b.custom_properties["baseline_scope"].string_value for b in blessings} == {history["config"].pipeline_name}
    assert again.baseline_metrics  # TFMA evaluated the baseline beside the candidate


def test_runs_lists_task_and_label_set_per_run(history):
    config = history["config"]
    summaries = summarize_all(config.metadata_sqlite, config.pipeline_name, with_metrics=False)
    assert [s.task for s in summaries] == ["single_label"] * 3
    table = render_runs(summaries)
    assert "task" in table.splitlines()[0] and "labels" in table.splitlines()[0]
    assert sum("single-label" in line for line in table.splitlines()) == 3
    assert any("fresh" in line for line in table.splitlines()[1:])
