"""The storage-event function as Cloud Run runs it: its source folder from `hftfx function-source`, served by
Google's functions-framework on 127.0.0.1 in a process that has only that folder (not this checkout), its
credentials from a Compute Engine metadata server, and TLS to a fake Vertex API. Eventarc's CloudEvents
arrive over HTTP (a storage finalize, and a Pub/Sub messagePublished around a storage notification); the
PipelineJob it creates is read at the fake as the API's proto.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from pipeline import cli
from pipeline.retraining import events
from pipeline.retraining.function_source import ENTRY_POINT, MEMORY
from tests import fake_vertex
from tests.fake_gcs import serve_objects
from tests.fake_vertex import FakeVertex
from tests.vertex_retraining import PRODUCER_MARK, job

ROOT = Path(__file__).resolve().parents[1]
PROFILE = "configs/vertex-retraining.yaml"
RUNNER = "hftfx-runner@my-gcp-project.iam.gserviceaccount.com"
HEAVY = ("tensorflow", "tfx", "apache_beam", "tensorflow_transform", "transformers")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The producer's ready markers in the data bucket (fake Cloud Storage), with the mark the profile asks for: what
# the function re-reads each event's object by. A deployment that has trained span 6 (the fake Vertex's one job).
MARKERS = {
    "my-hftfx-data/reviews/span-7/_SUCCESS": {"generation": "1700000000000007", "metadata": PRODUCER_MARK},
    "my-hftfx-data/reviews/span-8/_SUCCESS": {"generation": "1700000000000008", "metadata": PRODUCER_MARK},
}


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    """The fake Vertex API (TLS) holding span 6's run, the metadata server, the data bucket, and the function's
    source folder compiled for them."""
    work = tmp_path_factory.mktemp("function")
    api = FakeVertex()
    api.jobs = [job(6, "PIPELINE_STATE_SUCCEEDED")]
    tls = fake_vertex.loopback_certificate(work)
    with (
        pytest.MonkeyPatch.context() as monkeypatch,
        fake_vertex.serve(api, tls) as address,
        fake_vertex.serve_metadata_server("my-gcp-project", RUNNER) as metadata,
        serve_objects(monkeypatch, dict.fromkeys(MARKERS, b""), MARKERS),
    ):
        source = work / "source"
        assert cli.main(["function-source", "--set", f"cloud.api_endpoint={address}", "--output", str(source)]) == 0
        storage = os.environ["STORAGE_EMULATOR_HOST"]
        yield {"api": api, "source": source, "metadata": metadata, "ca": work / "ca.pem", "home": work, "gcs": storage}


def _function_env(deployed) -> dict[str, str]:
    """What the Cloud Run container has: no checkout on the path, credentials from the metadata server (and here,
    Cloud Storage at the fake)."""
    keep = {k: os.environ[k] for k in ("PATH", "LANG", "TMPDIR") if k in os.environ}
    return {
        **keep,
        "STORAGE_EMULATOR_HOST": deployed["gcs"],
        "HOME": str(deployed["home"]),
        "GCE_METADATA_HOST": deployed["metadata"],
        "GCE_METADATA_IP": deployed["metadata"],
        "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(deployed["ca"]),
        "K_SERVICE": "hf-text-classifier-retraining-on-data",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",  # as Cloud Run's Python runtime: log lines reach Cloud Logging as printed
    }


def test_the_source_folder_is_what_cloud_run_functions_build(deployed):
    source = deployed["source"]
    assert {"main.py", "requirements.txt", "profile.yaml", "pipeline.yaml", "pipeline", "components", "models"} <= {
        p.name for p in source.iterdir()
    }
    requirements = (source / "requirements.txt").read_text()
    pinned = {line.split("==")[0] for line in requirements.splitlines() if "==" in line and not line.startswith("#")}
    assert {"functions-framework", "google-cloud-aiplatform", "pyyaml", "cloudevents"} <= pinned
    assert "--hash=sha256:" in requirements  # the lock's hashes: pip checks every package
    assert not pinned & {"tensorflow", "tfx", "apache-beam"}
    profile = yaml.safe_load((source / "profile.yaml").read_text())
    assert profile["pipeline_name"] == "hf-text-classifier-retraining"
    assert not list(source.rglob("*_test.py"))


def test_the_metadata_server_answers_for_the_account_by_its_email_as_by_default(deployed):
    """google-auth asks for the account by its email once it knows it (its regional access boundary lookup may learn
    it before a token refresh); the real server answers both names, and the function's requests then depend on it."""
    probe = (
        "from google.auth import compute_engine; from google.auth.transport.requests import Request; "
        f"credentials = compute_engine.Credentials(service_account_email={RUNNER!r}); "
        "credentials.refresh(Request()); print(credentials.token, credentials.service_account_email)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], env=_function_env(deployed), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["fake-token", RUNNER]


def test_importing_the_function_stays_light(deployed):
    """No TensorFlow, TFX or Beam at import; time and peak memory (VmHWM: ru_maxrss would keep the forking
    test process's) measured in a fresh process."""
    probe = (
        "import re, sys, time; started = time.perf_counter(); import main, pipeline; "
        "peak = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1); "
        "print(round(time.perf_counter() - started, 3), peak, "
        f"pipeline.__file__, sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=deployed["source"],
        env={**_function_env(deployed), "PYTHONPATH": str(deployed["source"])},
        capture_output=True,
        text=True,
        check=True,
    )
    seconds, peak_kb, package, heavy = done.stdout.split(maxsplit=3)
    print(f"function import: {seconds} s, peak {int(peak_kb) // 1024} MiB")
    assert heavy.strip() == "[]"
    assert Path(package).is_relative_to(deployed["source"])  # the folder's own copy, not this checkout
    assert int(peak_kb) < 128 * 1024


def _tree_peak_mib(pid: int) -> int:
    """Peak resident memory (VmHWM) summed over the process and its children: what the container holds."""
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        status = Path(f"/proc/{current}/status").read_text()
        total += int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM")))
        children = Path(f"/proc/{current}/task/{current}/children")
        pending += [int(c) for c in children.read_text().split()] if children.exists() else []
    return total // 1024


@pytest.fixture(scope="module")
def function(deployed):
    """functions-framework serving main.py's entry point on 127.0.0.1, as the Cloud Run container does."""
    port = _free_port()
    log = open(deployed["home"] / "function.log", "w")  # noqa: SIM115 (closed after the server stops)
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "functions_framework"),
            *("--target", ENTRY_POINT, "--source", "main.py", "--signature-type", "cloudevent"),
            *("--host", "127.0.0.1", "--port", str(port)),
        ],
        cwd=deployed["source"],
        env=_function_env(deployed),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/"
    for _ in range(300):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            assert server.poll() is None, (deployed["home"] / "function.log").read_text()
            time.sleep(0.1)
    try:
        yield {"url": url, "process": server, "log": deployed["home"] / "function.log"}
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def _post(url: str, headers: dict[str, str], body: dict) -> tuple[int, str]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json", **headers})
    with urllib.request.urlopen(request, timeout=120) as answer:
        return answer.status, answer.read().decode()


def _ce_headers(event_type: str, source: str, subject: str = "") -> dict[str, str]:
    """A CloudEvent in HTTP binary content mode, as Eventarc delivers it."""
    headers = {
        "ce-id": f"{time.time_ns()}",
        "ce-specversion": "1.0",
        "ce-type": event_type,
        "ce-source": source,
        "ce-time": "2026-11-24T10:00:00Z",
    }
    return {**headers, "ce-subject": subject} if subject else headers


def test_a_storage_finalize_cloudevent_becomes_one_pipeline_job_at_vertex(deployed, function):
    api = deployed["api"]
    marker = {"bucket": "my-hftfx-data", "name": "reviews/span-7/_SUCCESS", "generation": "1700000000000007"}
    headers = _ce_headers(
        events.FINALIZED_TYPES[0],
        "//storage.googleapis.com/projects/_/buckets/my-hftfx-bucket",
        "objects/" + marker["name"],
    )
    status, _ = _post(function["url"], headers, marker)
    assert status == 200, function["log"].read_text()
    (created,) = [r for r in api.received if r.method == "PipelineService/CreatePipelineJob"]
    assert created.authorization == "Bearer fake-token"  # the metadata server's token, over TLS
    request = created.request
    assert request.parent == "projects/my-gcp-project/locations/us-central1"
    assert request.pipeline_job_id == "hf-text-classifier-retraining-span-7-try-1"
    assert request.pipeline_job.runtime_config.parameter_values["span"] == 7
    assert request.pipeline_job.service_account == RUNNER
    assert request.pipeline_job.pipeline_spec["pipelineInfo"]["name"] == "hf-text-classifier-retraining"
    logged = [json.loads(line) for line in function["log"].read_text().splitlines() if line.startswith("{")]
    assert any(e["severity"] == "INFO" and e["message"].startswith("submitted: span 7") for e in logged), logged
    peak = _tree_peak_mib(function["process"].pid)
    print(f"function peak after one event: {peak} MiB (deployed with --memory {MEMORY})")
    assert peak < int(MEMORY.removesuffix("Mi")) * 3 // 4


def test_a_pubsub_message_published_cloudevent_around_a_storage_notification_is_unwrapped(deployed, function):
    api = deployed["api"]
    attributes = {
        "bucketId": "my-hftfx-data",
        "objectId": "reviews/span-8/_SUCCESS",
        "eventType": "OBJECT_FINALIZE",
        "objectGeneration": "1700000000000008",
        "payloadFormat": "JSON_API_V1",
    }
    resource = {"bucket": "my-hftfx-data", "name": "reviews/span-8/_SUCCESS"}
    body = {
        "message": {"attributes": attributes, "data": base64.b64encode(json.dumps(resource).encode()).decode()},
        "subscription": "projects/my-gcp-project/subscriptions/eventarc-us-central1-hftfx-sub",
    }
    headers = _ce_headers(
        events.PUBSUB_MESSAGE_TYPE, "//pubsub.googleapis.com/projects/my-gcp-project/topics/hftfx-data"
    )
    status, _ = _post(function["url"], headers, body)
    assert status == 200, function["log"].read_text()
    jobs = [r.request.pipeline_job_id for r in api.received if r.method == "PipelineService/CreatePipelineJob"]
    assert "hf-text-classifier-retraining-span-8-try-1" in jobs
    # Not span data: acknowledged (so Eventarc does not retry it) and nothing is sent.
    before = len(api.received)
    other = {"bucket": "my-hftfx-data", "name": "notes/readme.txt"}
    status, _ = _post(function["url"], _ce_headers(events.FINALIZED_TYPES[0], "//storage.googleapis.com/x"), other)
    assert status == 200 and len(api.received) == before
