"""Shared fixtures. Tests never reach the network: the hub is switched off for the whole session."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"

import pytest

import pipeline  # noqa: F401  (configures TF_USE_LEGACY_KERAS before anything imports TensorFlow)


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", help="also run the tests marked slow (make test-all)")


def pytest_collection_modifyitems(config, items):
    """Tests marked slow are skipped, and say so, unless --slow: `make test` stays within CI's time."""
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="marked slow: run with `make test-all` (pytest --slow)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory):
    from tests.tiny_model import write_tiny_bert

    return write_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def packaged_model_dir():
    from models.pretrained import packaged_model_dir as locate

    return locate("all-MiniLM-L6-v2")


@pytest.fixture(scope="session")
def family_model_dir(tmp_path_factory):
    """family -> a tiny model folder of that tokenizer family (tests/model_families.py), built once a session."""
    from tests.model_families import write_tiny_model

    built = {}

    def build(family: str):
        if family not in built:
            built[family] = write_tiny_model(family, tmp_path_factory.mktemp(family))
        return built[family]

    return build
