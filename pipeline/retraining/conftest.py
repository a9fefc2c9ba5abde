"""Fixtures of the Vertex retraining tests: the fake Vertex API, the retraining profile and its compiled spec."""

import pytest

from pipeline.cloud.kubeflow_v2_runner import compile_pipeline
from pipeline.config import pipeline_config
from tests import fake_vertex, vertex_retraining
from tests.fake_gcs import serve_objects
from tests.fake_vertex import FakeVertex
from tests.vertex_retraining import PROFILE, at


@pytest.fixture
def fake(monkeypatch):
    """The fake Vertex API on 127.0.0.1; tests put past jobs in `fake.jobs`."""
    api = FakeVertex()
    with fake_vertex.serve(api) as address, fake_vertex.plaintext_channels(monkeypatch, address):
        api.address = address
        yield api


@pytest.fixture(scope="module")
def profile():
    return pipeline_config.load_config(PROFILE)


@pytest.fixture(scope="module")
def template(profile, tmp_path_factory):
    path = tmp_path_factory.mktemp("spec") / "pipeline-retraining.yaml"
    compile_pipeline(profile, path)
    return str(path)


@pytest.fixture
def template_at_fake(profile, fake, tmp_path):
    """The profile's spec compiled for the fake's API host (the host is baked into the spec's Vertex calls)."""
    path = tmp_path / "pipeline-retraining.yaml"
    compile_pipeline(at(fake, profile), path)
    return str(path)


@pytest.fixture(autouse=True)
def stored(monkeypatch):
    """The data bucket on a fake Cloud Storage, holding the objects tests' storage events were written for."""
    vertex_retraining.STORED.clear()
    vertex_retraining.DESCRIBED.clear()
    with serve_objects(monkeypatch, vertex_retraining.STORED, vertex_retraining.DESCRIBED):
        yield vertex_retraining.STORED
