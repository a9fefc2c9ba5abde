"""Fixtures of the cloud tests: the shipped profiles, the committed spec and the fake Vertex API."""

import pytest
import yaml

from pipeline.cloud.compiled_specs import PIPELINE_YAML
from pipeline.config import pipeline_config
from tests import fake_vertex
from tests.cloud_specs import DATAFLOW_IMAGE, PROFILE, ROOT


@pytest.fixture(scope="module")
def profile():
    return pipeline_config.load_config(PROFILE)


@pytest.fixture(scope="module")
def committed():
    return yaml.safe_load((ROOT / PIPELINE_YAML).read_text())


@pytest.fixture(scope="module")
def on_dataflow(profile):
    """The profile with its data components on Dataflow, as docs/vertex.md's "Data on Dataflow" sets it."""
    cloud = profile.cloud.model_copy(update={"beam_runner": "DataflowRunner", "dataflow_image_uri": DATAFLOW_IMAGE})
    return profile.model_copy(update={"cloud": cloud})


@pytest.fixture
def vertex_api(monkeypatch):
    """The fake Vertex API on 127.0.0.1 (and Cloud Storage's bucket lookups); aiplatform's global settings,
    which `aiplatform.init` changes, are put back afterwards."""
    from google.cloud.aiplatform import initializer

    settings = dict(vars(initializer.global_config))
    fake = fake_vertex.FakeVertex()
    with (
        fake_vertex.serve(fake) as address,
        fake_vertex.plaintext_channels(monkeypatch, address),
        fake_vertex.serve_storage(monkeypatch, {"my-hftfx-bucket"}) as fake.storage_paths,
    ):
        yield fake, address
    vars(initializer.global_config).clear()
    vars(initializer.global_config).update(settings)


@pytest.fixture(scope="module")
def kubeflow_profile():
    return pipeline_config.load_config(ROOT / "configs" / "kubeflow.yaml")
