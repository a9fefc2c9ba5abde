"""Shared fixtures. Tests never reach the network: the hub is switched off for the whole session."""

from __future__ import annotations

import os
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"

import pytest

import pipeline  # noqa: F401  (configures TF_USE_LEGACY_KERAS before anything imports TensorFlow)


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", help="also run the tests marked slow (make test-all)")


def pytest_collection_modifyitems(config, items):
    """Tests marked slow are skipped, and say so, unless --slow: `make test` stays within CI's time. Files run
    longest first (longest_first)."""
    items[:] = longest_first(items)
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="marked slow: run with `make test-all` (pytest --slow)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def longest_first(items: list) -> list:
    """The files holding whole-pipeline runs (marked e2e: minutes each) first, then the rest, most tests first; a
    file's tests stay together and in order. `make test` hands pytest-xdist one file at a time in this order
    (--no-loadscope-reorder), so the two workers end together on short files rather than one waiting on the
    other's last pipeline run: xdist's own order, most tests first, put the e2e files, which hold few, last."""
    files: dict[str, list] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    order = sorted(files.values(), key=lambda tests: (not any(t.get_closest_marker("e2e") for t in tests), -len(tests)))
    return [item for tests in order for item in tests]


@pytest.fixture(autouse=True)
def float32_keras_policy():
    """Each test starts with Keras' global precision policy at float32: the Trainer sets it for its precision
    (mixed_bfloat16 ...) in the process LocalDagRunner runs it in, and a test comparing with a float32 reference
    must not depend on which tests ran before it. Only where Keras is already loaded: the other tests stay light."""
    import sys

    if "tf_keras" in sys.modules:
        sys.modules["tf_keras"].mixed_precision.set_global_policy("float32")
    yield


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory):
    from tests.tiny_model import write_tiny_bert

    return write_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def review_texts() -> list[str]:
    """The packaged corpus' 12,808 reviews: real texts no one here wrote, for the tokenizer parity tests."""
    from components.example_gen.sources import rotten_tomatoes_reviews

    return list(rotten_tomatoes_reviews()["text"])


@pytest.fixture(scope="session")
def packaged_model_dir():
    from models.hub.pretrained import packaged_model_dir as locate

    return locate("all-MiniLM-L6-v2")


@pytest.fixture(scope="session")
def family_model_dir(tmp_path_factory):
    """family -> a tiny model folder of that tokenizer family (tests/model_families.py), built once a session."""
    from tests.model_families import write_tiny_model

    return built_once(tmp_path_factory, "family", write_tiny_model)


@pytest.fixture(scope="session")
def released_model_dir(tmp_path_factory):
    """name -> a folder of an encoder released since transformers 5 (tests/model_families.py: RELEASED_SINCE), its
    bare encoder written by transformers 5 + PyTorch beside its tokenizer, built once a session."""
    from tests.model_families import write_released_since

    return built_once(tmp_path_factory, "released", lambda name, folder: write_released_since(name, folder / "model"))


def built_once(tmp_path_factory, kind: str, write):
    """name -> write(name, folder)'s folder, written once a session by whichever pytest-xdist worker first asks and
    read by the others, where each worker wrote its own (about two minutes of tokenizer training and PyTorch a
    worker here). pytest-xdist's recipe: the session's temp folder, which every worker's sits in, and a file lock;
    a folder is used only once its writer finished (a `.done` beside it)."""
    import shutil

    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp().parent / "built-once" if os.environ.get("PYTEST_XDIST_WORKER") else None
    folders: dict[str, Path] = {}

    def build(name: str):
        if name in folders:
            return folders[name]
        if shared is None:  # one process: nobody to share with
            folders[name] = write(name, tmp_path_factory.mktemp(name))
            return folders[name]
        folder, done = shared / kind / name, shared / kind / f"{name}.done"
        folder.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(f"{folder}.lock"):
            if not done.is_file():
                shutil.rmtree(folder, ignore_errors=True)  # a writer that failed part way
                folder.mkdir()
                done.write_text(str(write(name, folder)))
        folders[name] = Path(done.read_text())
        return folders[name]

    return build


@pytest.fixture
def run_example_gen():
    """Runs the HF dataset ExampleGen alone under LocalDagRunner, as a local run does (its Beam runner, sqlite ML
    Metadata): run(tmp_path, dataset_config, beam_args=(), root="root") -> the Examples artifact it recorded."""
    from tfx.orchestration import metadata
    from tfx.orchestration import pipeline as tfx_pipeline
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner

    from components.example_gen.component import HFDatasetExampleGen
    from components.local_beam import local_beam_runner

    def run(tmp_path, dataset, beam_args=(), root="root"):
        root = tmp_path / root
        connection = metadata.sqlite_metadata_connection_config(str(root / "m.sqlite"))
        with local_beam_runner():
            LocalDagRunner().run(
                tfx_pipeline.Pipeline(
                    pipeline_name="example-gen-test",
                    pipeline_root=str(root),
                    components=[HFDatasetExampleGen(dataset=dataset)],
                    metadata_connection_config=connection,
                    beam_pipeline_args=list(beam_args),
                )
            )
        with metadata.Metadata(connection) as store:
            (artifact,) = store.store.get_artifacts_by_type("Examples")
        return artifact

    return run
