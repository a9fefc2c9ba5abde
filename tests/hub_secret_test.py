"""A cloud run's Hugging Face token: the compiled spec names its Secret Manager version, never the token; each
component that reaches the Hub reads it at run time with the run's own credentials.

The component runs in its own process as a cloud container does: credentials from a (fake) metadata server,
only the variables the spec gives it (the secret's name), the real Secret Manager client over TLS to a fake
Secret Manager, the real huggingface_hub to a fake Hub on 127.0.0.1 holding a private model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import json_format

from components.publisher.config import HubConfig
from models.hub.hub_token import SECRET_MANAGER_ENDPOINT_ENV, TOKEN_SECRET_ENV
from pipeline.cloud.kubeflow_v2_runner import compile_spec
from pipeline.config import pipeline_config
from tests import fake_secret_manager, fake_vertex
from tests.fake_hub import XET_OFF, Commit, FakeHub, Repo, serve_hub

ROOT = Path(__file__).resolve().parents[1]
SECRET = "projects/my-gcp-project/secrets/hf-token/versions/3"
TOKEN = "hf_cloud_token_held_in_secret_manager"
RUNNER_TOKEN = "runner-access-token"  # what the metadata server hands the run's service account
RUNNER = "hftfx-runner@my-gcp-project.iam.gserviceaccount.com"
PRIVATE_MODEL = "reviews-team/private-tiny-bert"
PUBLISHED = "reviews-team/published-sentiment"


def test_the_compiled_spec_gives_every_container_the_secrets_name_and_never_the_token(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)  # even with a token in the shell that compiles
    config = pipeline_config.load_config(
        ROOT / "configs/vertex.yaml",
        {
            "model.name": "gs://my-bucket/models/tiny-bert",
            "dataset.name": "reviews-team/private-reviews",
            "hub.repo_id": PUBLISHED,
            "hub.token_secret": SECRET,
            # a recipe set in full: compile reads no model to choose it (gs:// is not reachable here)
            "training.learning_rate": 5e-5,
            "training.warmup_ratio": 0.1,
            "training.gradient_clip_norm": 1.0,
        },
    )

    spec = compile_spec(config)

    from kfp.pipeline_spec import pipeline_spec_pb2

    json_format.ParseDict(spec, pipeline_spec_pb2.PipelineSpec())  # KFP's IR takes the containers' env
    assert TOKEN not in json.dumps(spec)
    containers = [e["container"] for e in spec["deploymentSpec"]["executors"].values() if "container" in e]
    assert len(containers) >= 8 and all(c["env"] == [{"name": TOKEN_SECRET_ENV, "value": SECRET}] for c in containers)
    parameters = spec["root"]["dag"]["tasks"]["Trainer"]["inputs"]["parameters"]
    trainer = json.loads(parameters["custom_config"]["runtimeValue"]["constant"])
    (pool,) = trainer["ai_platform_training_args"]["job_spec"]["worker_pool_specs"]
    assert pool["container_spec"]["env"] == [{"name": TOKEN_SECRET_ENV, "value": SECRET}]  # the CustomJob's worker


def test_a_cloud_push_without_a_token_secret_is_refused_before_compiling():
    config = pipeline_config.load_config(ROOT / "configs/vertex.yaml", {"hub.repo_id": PUBLISHED})
    with pytest.raises(pipeline_config.ConfigError, match=r"set hub.token_secret to its version"):
        compile_spec(config)
    with pytest.raises(pipeline_config.ConfigError, match=r"is not a Secret Manager secret version"):
        pipeline_config.load_config(overrides={"hub.token_secret": "hf-token"})


# What a component that reaches the Hub does in its container: download the (private) base model, and for the
# HFPublisher push the export. Nothing of the token is printed.
_COMPONENT = """
import sys
from components.publisher.config import HubConfig
from components.publisher.hub_push import push_folder
from models.hub.pretrained import resolve_model_dir

folder = resolve_model_dir(sys.argv[1])
hub = HubConfig.model_validate_json(sys.argv[2])
revision = push_folder(str(folder), hub, "hf-text-classifier-20261126", "test accuracy 0.8")
print(sorted(p.name for p in folder.iterdir()), revision.tag, revision.pushed)
"""


@pytest.fixture
def cloud(tmp_path, tiny_bert_dir):
    """The fake Hub holding the private model, a TLS Secret Manager, a metadata server: what a cloud container
    reaches; yields (hub, secret manager, the container's environment)."""
    files = {p.name: p.read_bytes() for p in tiny_bert_dir.iterdir()}  # the model its owner uploaded
    hub = FakeHub(
        tokens={TOKEN: "write"}, repos={PRIVATE_MODEL: Repo(True, [Commit("c0ffee" * 6 + "c0ff", "up", files)])}
    )
    secrets = fake_secret_manager.FakeSecretManager(versions={SECRET: TOKEN.encode() + b"\n"}, readers={RUNNER_TOKEN})
    tls = fake_vertex.loopback_certificate(tmp_path)
    with (
        serve_hub(hub) as endpoint,
        fake_secret_manager.serve(secrets, tls) as address,
        fake_vertex.serve_metadata_server("my-gcp-project", RUNNER, RUNNER_TOKEN) as metadata,
    ):
        keep = ("PATH", "LANG", "TMPDIR", "PYTHONPATH", "TF_USE_LEGACY_KERAS")
        env = {
            **{k: os.environ[k] for k in keep if k in os.environ},
            "HOME": str(tmp_path / "home"),  # no gcloud credentials file: the metadata server's identity
            "GCE_METADATA_HOST": metadata,
            "GCE_METADATA_IP": metadata,
            "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(tmp_path / "ca.pem"),
            SECRET_MANAGER_ENDPOINT_ENV: address,
            TOKEN_SECRET_ENV: SECRET,  # what the compiled spec sets
            "HF_ENDPOINT": endpoint,
            "HF_HUB_CACHE": str(tmp_path / "hub-cache"),
            "HF_HUB_OFFLINE": "0",
            **XET_OFF,
        }
        yield hub, secrets, env


def _component(env, *args):
    return subprocess.run(
        [sys.executable, "-c", _COMPONENT, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def test_a_cloud_component_reads_the_token_from_secret_manager_to_download_a_private_model_and_push(cloud):
    hub, secrets, env = cloud
    target = HubConfig(repo_id=PUBLISHED, endpoint=env["HF_ENDPOINT"], token_secret=SECRET)

    done = _component(env, PRIVATE_MODEL, target.model_dump_json())

    assert done.returncode == 0, done.stderr[-3000:]
    assert "config.json" in done.stdout and "model.safetensors" in done.stdout  # the private model, downloaded
    assert secrets.received and all(r == (SECRET, f"Bearer {RUNNER_TOKEN}") for r in secrets.received)
    # every Hub call carries the secret's token (the LFS upload goes to the storage URL the Hub handed out)
    assert {token for _, path, token in hub.requests if not path.startswith("/lfs-upload/")} == {f"Bearer {TOKEN}"}
    (commit,) = hub.repos[PUBLISHED].commits
    assert "config.json" in hub.repos[PUBLISHED].files_at(commit.oid)
    assert TOKEN not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({TOKEN_SECRET_ENV: SECRET.replace("versions/3", "versions/4")}, "Secret Manager has no .*versions/4"),
        ({"denied": True}, "may not read .*grant it roles/secretmanager.secretAccessor"),
    ],
)
def test_a_missing_or_denied_secret_stops_the_first_component_with_the_fix(cloud, change, message):
    """The ExampleGen, the run's first component, reads the token before anything else."""
    hub, secrets, env = cloud
    if change.pop("denied", False):
        secrets.readers.clear()  # the run's service account lost its grant
    script = "from components.example_gen.executor import Executor\nExecutor().Do({}, {}, {})"
    done = subprocess.run(
        [sys.executable, "-c", script], env={**env, **change}, cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode != 0
    assert "HubTokenError" in done.stderr
    import re

    assert re.search(message, done.stderr), done.stderr[-2000:]
    assert hub.requests == []  # nothing reached the Hub
