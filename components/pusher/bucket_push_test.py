"""Pushes into a gs:// serving directory, through google-cloud-storage to a fake of Cloud Storage's JSON API:
versions are claimed once, the graph lands last, two pushes in one second never share a version."""

import subprocess
import sys
from pathlib import Path

import pytest
from google.cloud import storage

from components.pusher import bucket_push
from components.pusher.bucket_push import CLAIMS, claim_version, model_files, push_to_bucket
from tests.fake_gcs import serve_objects

ROOT = Path(__file__).resolve().parents[1]
BASE = "gs://serving-bucket/models/text_classifier"


def _model(folder: Path, tag: str = "a") -> Path:
    (folder / "variables").mkdir(parents=True)
    (folder / "assets.extra").mkdir()
    (folder / "saved_model.pb").write_bytes(f"graph of {tag}".encode())
    (folder / "variables" / "variables.data-00000-of-00001").write_bytes(tag.encode() * 50_000)
    (folder / "variables" / "variables.index").write_bytes(b"index")
    (folder / "assets.extra" / "tf_serving_warmup_requests").write_bytes(b"warm")
    return folder


def _version(objects: dict, version: str) -> dict[str, bytes]:
    prefix = f"serving-bucket/models/text_classifier/{version}/"
    return {k.removeprefix(prefix): v for k, v in objects.items() if k.startswith(prefix)}


def test_the_graph_is_written_last_so_a_partial_version_is_no_model(tmp_path):
    assert model_files(str(_model(tmp_path / "m")))[-1] == "saved_model.pb"


def test_a_push_claims_its_version_then_lands_every_file(tmp_path, monkeypatch):
    objects = {"serving-bucket/models/text_classifier/1700000000/saved_model.pb": b"older"}
    with serve_objects(monkeypatch, objects) as asked:
        destination, version = push_to_bucket(str(_model(tmp_path / "m")), BASE)
    assert destination == f"{BASE}/{version}" and int(version) > 1700000000
    assert set(_version(objects, version)) == {
        "saved_model.pb",
        "variables/variables.data-00000-of-00001",
        "variables/variables.index",
        "assets.extra/tf_serving_warmup_requests",
    }
    assert f"serving-bucket/models/text_classifier/{CLAIMS}/{version}" in objects
    uploads = [p for p in asked if p.startswith("/upload/")]
    assert len(uploads) == 5  # the claim, then the four files


def test_a_version_claimed_between_listing_and_claim_goes_to_the_next_push(monkeypatch):
    """The listing is stale (it missed a claim made a moment ago): the conditional create refuses, the push
    takes the next number."""
    objects = {f"serving-bucket/models/text_classifier/{CLAIMS}/1800000000": b"{}"}
    listings = iter([[], [1800000000]])
    monkeypatch.setattr(bucket_push, "taken_versions", lambda bucket, prefix: next(listings))
    with serve_objects(monkeypatch, objects):
        bucket = storage.Client().bucket("serving-bucket")
        assert claim_version(bucket, "models/text_classifier", now=1_800_000_000.2) == "1800000001"


def test_a_file_already_in_the_version_is_never_overwritten(tmp_path, monkeypatch):
    """A writer that skipped the claim (TFX's stock Pusher) holds the number: the push stops instead of mixing."""
    objects = {}
    monkeypatch.setattr(bucket_push, "claim_version", lambda bucket, prefix: "1900000000")
    objects["serving-bucket/models/text_classifier/1900000000/variables/variables.index"] = b"theirs"
    with serve_objects(monkeypatch, objects), pytest.raises(FileExistsError, match="push again"):
        push_to_bucket(str(_model(tmp_path / "m")), BASE)
    assert objects["serving-bucket/models/text_classifier/1900000000/variables/variables.index"] == b"theirs"
    assert "serving-bucket/models/text_classifier/1900000000/saved_model.pb" not in objects


_PUSH = """
import sys, time
from pathlib import Path
from components.pusher import bucket_push
bucket_push.time.time = lambda: 1_800_000_000.5  # both runs push within the same second
start = Path(sys.argv[3])
while not start.exists():
    time.sleep(0.001)
print(bucket_push.push_to_bucket(sys.argv[1], sys.argv[2])[1])
"""


def test_two_runs_pushing_to_one_bucket_in_the_same_second_get_two_complete_versions(tmp_path, monkeypatch):
    """Two processes (two pipeline roots' Pushers, on two hosts for all the bucket knows) released at once."""
    objects, start = {}, tmp_path / "go"
    models = [_model(tmp_path / run, run) for run in ("a", "b")]
    with serve_objects(monkeypatch, objects):
        runs = [
            subprocess.Popen(
                [sys.executable, "-c", _PUSH, str(m), BASE, str(start)], cwd=ROOT, stdout=subprocess.PIPE, text=True
            )
            for m in models
        ]
        start.touch()
        versions = [r.communicate(timeout=120)[0].strip() for r in runs]
    assert sorted(versions) == ["1800000000", "1800000001"]
    for version, run in zip(versions, ("a", "b"), strict=True):
        files = _version(objects, version)
        assert files["saved_model.pb"] == f"graph of {run}".encode()
        assert files["variables/variables.data-00000-of-00001"] == run.encode() * 50_000
        assert len(files) == 4


def test_the_pusher_component_pushes_a_blessed_model_to_a_bucket(tmp_path, monkeypatch):
    """The Pusher executor as TFX calls it, with a gs:// serving directory: the bucket path, then TFX's record."""
    from tfx.proto import pusher_pb2
    from tfx.types import standard_artifacts
    from tfx.utils import proto_utils

    from components.pusher.executor import Executor

    model, blessing, pushed = (
        standard_artifacts.Model(),
        standard_artifacts.ModelBlessing(),
        standard_artifacts.PushedModel(),
    )
    model.uri, pushed.uri = str(tmp_path / "trainer"), str(tmp_path / "pushed")
    _model(tmp_path / "trainer" / "Format-Serving")
    blessing.uri = str(tmp_path / "blessing")
    blessing.set_int_custom_property("blessed", 1)
    destination = pusher_pb2.PushDestination(filesystem=pusher_pb2.PushDestination.Filesystem(base_directory=BASE))
    objects = {}
    with serve_objects(monkeypatch, objects):
        Executor().Do(
            {"model": [model], "model_blessing": [blessing]},
            {"pushed_model": [pushed]},
            {"push_destination": proto_utils.proto_to_json(destination)},
        )
    version = pushed.get_string_custom_property("pushed_version")
    assert pushed.get_int_custom_property("pushed") == 1
    assert pushed.get_string_custom_property("pushed_destination") == f"{BASE}/{version}"
    assert _version(objects, version)["saved_model.pb"] == b"graph of a"
