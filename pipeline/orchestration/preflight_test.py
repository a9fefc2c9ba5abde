import pytest

from models.task import task_contract, write_contract
from pipeline.config import pipeline_config
from pipeline.orchestration.preflight import ServingContractError, check_serving_contract


def _config(tmp_path, **overrides):
    return pipeline_config.load_config(overrides={"serving_dir": str(tmp_path / "serving"), **overrides})


def _serve(config, version: str, contract):
    folder = config.push_base_directory + f"/{version}"
    write_contract(folder, contract)


BINARY = task_contract(["neg", "pos"], ["text"])


def test_nothing_served_yet_and_the_same_contract_pass(tmp_path):
    config = _config(tmp_path)
    check_serving_contract(config, BINARY)
    _serve(config, "100", BINARY)
    check_serving_contract(config, BINARY)


@pytest.mark.parametrize(
    ("contract", "said"),
    [
        (task_contract(["pos", "neg"], ["text"]), "label order"),
        (task_contract(["a", "b", "c"], ["text"]), "label set"),
        (task_contract(["neg", "pos"], ["text", "text_pair"]), "inputs"),
    ],
)
def test_another_contract_under_the_served_name_is_refused_with_the_fixes(tmp_path, contract, said):
    config = _config(tmp_path)
    _serve(config, "100", task_contract(["x", "y"], ["text"]))
    _serve(config, "200", BINARY)  # the newest version is what clients get
    with pytest.raises(ServingContractError) as error:
        check_serving_contract(config, contract)
    message = str(error.value)
    assert "version 200" in message and said in message
    assert "--set model_name=NAME" in message and "replace_serving_contract=true" in message
    check_serving_contract(_config(tmp_path, replace_serving_contract=True), contract)
    check_serving_contract(_config(tmp_path, model_name="other"), contract)


@pytest.mark.parametrize(
    ("overrides", "sizes", "message"),
    [
        ({"training.early_stopping.patience": 2}, {"train": 100, "eval": 0}, "watches the eval split, which is empty"),
        ({"tuning.trials": 4}, {"train": 100, "eval": 0}, "tuning scores each trial on the eval split, which is"),
        ({}, {"train": 20, "eval": 5}, r"20 examples, fewer than one batch of 32 \(training.batch_size 32\)"),
        ({"tuning.trials": 2}, {"train": 24, "eval": 5}, r"one batch of 32 \(training.batch_size 32\)"),
        (
            {"tuning.trials": 2, "training.batch_size": 8, "tuning.search": {"batch_size": [8, 64]}},
            {"train": 40, "eval": 5},
            r"fewer than one batch of 64 \(tuning.search.batch_size 64\)",
        ),
        ({"training.cpu_replicas": 2}, {"train": 40, "eval": 5}, r"one batch of 64 \(training.batch_size 32 x 2 CPU"),
    ],
)
def test_what_training_and_tuning_need_of_the_splits_is_checked_before_any_component(overrides, sizes, message):
    from pipeline.config.pipeline_config import ConfigError, load_config
    from pipeline.orchestration.preflight import check_training_splits

    with pytest.raises(ConfigError, match=message):
        check_training_splits(load_config(overrides=overrides), sizes)
    check_training_splits(load_config(), {"train": 32, "eval": 0})  # auto patience: off without an eval split


def _cache_snapshot(cache, repo_id: str, commit: str, source) -> None:
    """A hub model in huggingface_hub's cache layout (what snapshot_download leaves), with refs/main -> commit."""
    import shutil

    repo = cache / f"models--{repo_id.replace('/', '--')}"
    shutil.copytree(source, repo / "snapshots" / commit)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(commit)


def test_a_hub_model_is_pinned_to_the_commit_the_preflight_read(tmp_path, tiny_bert_dir, monkeypatch):
    """The preflight resolves the branch through huggingface_hub (offline here: its cache) and fixes the commit in
    the config every component reads; a later push to the branch does not change what the run reads."""
    import huggingface_hub.constants

    from models.hub.pretrained import hub_commit, resolve_model_dir
    from pipeline.orchestration.choose import choose
    from pipeline.orchestration.preflight import check_model_and_data

    cache, first, second = tmp_path / "hub", "a" * 40, "b" * 40
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    _cache_snapshot(cache, "reviews-team/tiny-bert", first, tiny_bert_dir)
    config = pipeline_config.load_config(
        overrides={"model.name": "reviews-team/tiny-bert", "model.max_seq_length": 32, "dataset.limits.train": 64}
    )

    chosen = choose(check_model_and_data(config))

    assert chosen.config.model.revision == first and chosen.model_commit == first
    _cache_snapshot(cache, "reviews-team/tiny-bert", second, tiny_bert_dir)  # a push to main during the run
    assert resolve_model_dir("reviews-team/tiny-bert").name == second
    assert resolve_model_dir("reviews-team/tiny-bert", chosen.config.model.revision).name == first
    assert hub_commit(str(tiny_bert_dir), tiny_bert_dir) is None  # a folder has no commit to pin


def test_a_compiled_spec_pins_a_hub_model_to_its_commit(tmp_path, tiny_bert_dir, monkeypatch):
    """What compile_spec fixes before building the DAG: the branch resolved once, so every component of every run
    of the spec reads that commit; a revision that is a commit already is kept without reading the Hub."""
    import huggingface_hub.constants

    from pipeline.orchestration.choose import with_model_pinned

    cache, commit = tmp_path / "hub", "c" * 40
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    _cache_snapshot(cache, "reviews-team/tiny-bert", commit, tiny_bert_dir)
    config = pipeline_config.load_config(overrides={"model.name": "reviews-team/tiny-bert"})

    assert with_model_pinned(config).model.revision == commit
    assert config.model.revision is None  # the profile itself is unchanged: submit compares the spec with it
    pinned = pipeline_config.load_config(overrides={"model.name": "reviews-team/other", "model.revision": "d" * 40})
    assert with_model_pinned(pinned) is pinned  # not in the cache, and not read: already a commit
    packaged = pipeline_config.load_config()
    assert with_model_pinned(packaged) is packaged


def test_check_stops_a_run_whose_export_would_not_read_back(family_model_dir, tmp_path, monkeypatch):
    """`hftfx run --check` (check_run, as pipeline/cli/commands.py calls it) fails on it, naming what is missing,
    before any component: the run would otherwise train and fail at the publisher."""
    from models.serving.tokenizer_export import TokenizerExportError
    from models.serving.tokenizer_export_test import without_vocabulary_files
    from pipeline.orchestration.local_runner import check_run
    from tests.tiny_model import tiny_overrides

    without_vocabulary_files(monkeypatch)
    overrides = tiny_overrides(tmp_path, family_model_dir("xlm-roberta"), 32)
    with pytest.raises(TokenizerExportError, match=r"does not read back: .*has no vocabulary file"):
        check_run(pipeline_config.load_config(overrides=overrides))
    assert not (tmp_path / "root").exists() or not any((tmp_path / "root").rglob("*.tfrecord*"))
