"""The exit step of a compiled cloud run, executed as Vertex AI executes it: the spec's container command with
an executor input whose final status is what the backend sends. It reads the blessing from the run's record at
a fake Vertex API (TLS, the metadata server's identity) and publishes through the real Pub/Sub client to a fake
Publisher; the message is checked as the API's proto."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from google.cloud import aiplatform_v1
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from pipeline.cloud.kubeflow_v2_runner import compile_spec
from pipeline.config import pipeline_config
from tests import fake_pubsub, fake_vertex

ROOT = Path(__file__).resolve().parents[1]
TOPIC = "projects/my-gcp-project/topics/hftfx-runs"
JOB = "projects/my-gcp-project/locations/us-central1/pipelineJobs/hf-text-classifier-20261126"
RUNNER = "hftfx-runner@my-gcp-project.iam.gserviceaccount.com"


def _profile(**cloud):
    profile = pipeline_config.load_config(ROOT / "configs" / "vertex.yaml")
    return profile.model_copy(update={"cloud": profile.cloud.model_copy(update=cloud)})


def _exit_step(spec: dict) -> tuple[list[str], dict]:
    """(command line, constant parameters) of the RunNotifier task."""
    task = spec["root"]["dag"]["tasks"]["RunNotifier"]
    label = spec["components"][task["componentRef"]["name"]]["executorLabel"]
    container = spec["deploymentSpec"]["executors"][label]["container"]
    constants = {
        k: v["runtimeValue"]["constant"] for k, v in task["inputs"]["parameters"].items() if "runtimeValue" in v
    }
    return container["command"] + container["args"], constants


def test_the_exit_step_runs_after_the_whole_dag_and_gets_its_final_status():
    spec = compile_spec(_profile(notify_topic="hftfx-runs"))
    task = spec["root"]["dag"]["tasks"]["RunNotifier"]
    assert task["inputs"]["parameters"]["final_status_json"] == {"taskFinalStatus": {"producerTask": "tfx-dag"}}
    assert task["dependentTasks"] == ["tfx-dag"] and task["triggerPolicy"]["strategy"] == "ALL_UPSTREAM_TASKS_COMPLETED"
    assert _exit_step(spec)[1]["topic"] == TOPIC
    assert "RunNotifier" not in compile_spec(_profile())["root"]["dag"]["tasks"]


@pytest.mark.parametrize(
    ("topic", "message"),
    [
        ("goog-runs", "is not a Pub/Sub topic"),
        ("projects/my-gcp-project/subscriptions/x", "is not a Pub/Sub topic"),
        ("projects/X/topics/runs", "names no Google Cloud project id"),
    ],
)
def test_a_topic_pubsub_would_refuse_is_refused_before_compiling(topic, message):
    with pytest.raises(pipeline_config.ConfigError, match=message):
        compile_spec(_profile(notify_topic=topic))


def _evaluated_job(blessed: int) -> aiplatform_v1.PipelineJob:
    blessing = aiplatform_v1.Artifact(metadata={"blessed": blessed})
    evaluator = aiplatform_v1.PipelineTaskDetail(
        task_name="Evaluator", outputs={"blessing": aiplatform_v1.PipelineTaskDetail.ArtifactList(artifacts=[blessing])}
    )
    return aiplatform_v1.PipelineJob(name=JOB, job_detail=aiplatform_v1.PipelineJobDetail(task_details=[evaluator]))


def test_the_exit_step_publishes_a_not_blessed_run_read_from_vertex(tmp_path):
    """The case a schedule most needs told: the run succeeded, the model was refused (components/
    run_notifier_test.py covers the other outcomes)."""
    final = pipeline_spec_pb2.PipelineTaskFinalStatus(state="SUCCEEDED", pipeline_job_resource_name=JOB)
    vertex, pubsub = fake_vertex.FakeVertex(jobs=[_evaluated_job(0)]), fake_pubsub.FakePubSub({TOPIC})
    tls = fake_vertex.loopback_certificate(tmp_path)
    with (
        fake_vertex.serve(vertex, tls) as api,
        fake_pubsub.serve(pubsub) as emulator,
        fake_vertex.serve_metadata_server("my-gcp-project", RUNNER) as metadata,
    ):
        command, constants = _exit_step(compile_spec(_profile(notify_topic="hftfx-runs", api_endpoint=api)))
        executor_input = {
            "inputs": {"parameterValues": {**constants, "final_status_json": json_format.MessageToJson(final)}},
            "outputs": {"outputFile": str(tmp_path / "executor_output.json")},
        }
        keep = ("PATH", "LANG", "TMPDIR", "PYTHONPATH", "TF_USE_LEGACY_KERAS")
        env = {
            **{k: os.environ[k] for k in keep if k in os.environ},
            "HOME": str(tmp_path),  # no gcloud credentials: the metadata server's identity, as in the container
            "GCE_METADATA_HOST": metadata,
            "GCE_METADATA_IP": metadata,
            "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(tmp_path / "ca.pem"),
            "PUBSUB_EMULATOR_HOST": emulator,
        }
        line = [sys.executable if c == "python" else c for c in command]
        line[line.index("{{$}}")] = json.dumps(executor_input)
        done = subprocess.run(line, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (read,) = [r for r in vertex.received if r.method == "PipelineService/GetPipelineJob"]
    assert read.request.name == JOB and read.authorization == "Bearer fake-token"  # as the run's identity
    (request,) = pubsub.received
    assert request.topic == TOPIC
    (message,) = request.messages
    assert dict(message.attributes) == {"pipeline": "hf-text-classifier", "outcome": "not_blessed"}
    notice = json.loads(message.data)
    assert "did not bless" in notice["reason"] and notice["job"] == JOB
    assert notice["link"].endswith("/pipelines/runs/hf-text-classifier-20261126?project=my-gcp-project")
