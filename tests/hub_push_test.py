"""Publishing to a Hugging Face Hub: what huggingface_hub really sends, received by a fake Hub on 127.0.0.1.

`hftfx run` with hub.repo_id pushes the blessed model's export (config, weights through git-LFS, tokenizer,
the card, validated by the Hub's validate-yaml route) as one commit tagged with the run id; a run whose model
is not blessed pushes nothing; a missing, refused or read-only token stops the run before its first component;
a push deletes what an older one left that the new export lacks.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from components.publisher.config import HubConfig
from components.publisher.hub_push import HubPushError, check_credentials, push_folder, run_tag, untagged_run_id
from components.publisher.model_card import parse_card
from pipeline.config import pipeline_config
from tests.fake_hub import XET_OFF, FakeHub, serve_hub
from tests.tiny_model import tiny_run_command

TOKEN = "hf_fake_write_token"
READ_TOKEN = "hf_fake_read_token"
REPO = "reviews-team/tiny-sentiment"


@pytest.fixture(scope="module")
def hub():
    fake = FakeHub(tokens={TOKEN: "write", READ_TOKEN: "read"})
    with serve_hub(fake) as endpoint:
        yield fake, endpoint


def online(monkeypatch, endpoint: str | None = None) -> None:
    """huggingface_hub switched on for this test (conftest switches it off for the session) with a token."""
    import huggingface_hub.constants
    from huggingface_hub.utils import close_session

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)  # tests/fake_hub.py: XET_OFF
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    close_session()


def test_a_push_is_one_commit_tagged_with_the_run_and_a_retry_of_the_run_sends_nothing(hub, tmp_path, monkeypatch):
    fake, endpoint = hub
    online(monkeypatch)
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "bert"}')
    (folder / "tf_model.h5").write_bytes(os.urandom(4096))
    target = HubConfig(repo_id="team/idempotent", endpoint=endpoint)

    first = push_folder(str(folder), target, "2026-11-25T10:00:00.1", "run one")
    again = push_folder(str(folder), target, "2026-11-25T10:00:00.1", "run one")
    (folder / "tf_model.h5").unlink()  # the next export's weights are in another file: the old one must go
    (folder / "model.safetensors").write_bytes(os.urandom(4096))
    other = push_folder(str(folder), target, "2026-11-25T11:00:00.2", "run two")

    repo = fake.repos["team/idempotent"]
    assert repo.private is True  # hub.private defaults to a private repo
    assert first.pushed and not again.pushed and other.pushed
    assert again.commit == first.commit and again.tag == first.tag == "2026-11-25T10-00-00.1"
    assert [c.summary for c in repo.commits] == ["run one", "run two"]
    assert repo.tags[first.tag][0] == first.commit and repo.tags[other.tag][0] == other.commit
    assert set(repo.files_at(first.commit)) == {"config.json", "tf_model.h5"}
    assert set(repo.files_at(other.commit)) == {"config.json", "model.safetensors"}  # in the same commit
    assert repo.files_at(other.commit)["model.safetensors"] == (folder / "model.safetensors").read_bytes()
    assert {token for _, path, token in fake.requests if "idempotent" in path} == {f"Bearer {TOKEN}"}


def test_run_ids_become_tags_git_accepts():
    assert run_tag("2026-11-25T14:09:54.853213") == "2026-11-25T14-09-54.853213"
    assert run_tag("hf-text-classifier-20261125 run/1") == "hf-text-classifier-20261125-run-1"


@pytest.mark.parametrize(
    ("repo_id", "message"),
    [("no-namespace", "needs its namespace"), ("a//b", "is not a Hub repo id"), ("x/" + "n" * 100, "is not a Hub")],
)
def test_a_bad_repo_id_is_a_config_error(repo_id, message):
    with pytest.raises(pipeline_config.ConfigError, match=message):
        pipeline_config.load_config(overrides={"hub.repo_id": repo_id})


def test_a_run_without_a_run_id_is_tagged_by_its_weights_so_a_later_model_is_still_pushed(tmp_path):
    def export(name: str, weights: bytes) -> str:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(weights)
        (folder / "README.md").write_text(f"card of {name}")  # the card names the tag: not part of the digest
        return str(folder)

    first, retry, later = export("a", b"weights 1"), export("b", b"weights 1"), export("c", b"weights 2")

    assert untagged_run_id(first) == untagged_run_id(retry) != untagged_run_id(later)
    assert run_tag(untagged_run_id(first)) == untagged_run_id(first)


@pytest.mark.parametrize(
    ("token", "message"),
    [("hf_revoked", r"refuses the token in \$HF_TOKEN \(401"), (READ_TOKEN, "read-only for reviews-team")],
)
def test_a_token_the_hub_refuses_or_that_cannot_write_is_refused_before_the_run(hub, monkeypatch, token, message):
    _, endpoint = hub
    online(monkeypatch)
    monkeypatch.setenv("HF_TOKEN", token)
    with pytest.raises(HubPushError, match=message):
        check_credentials(HubConfig(repo_id=REPO, endpoint=endpoint))
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    check_credentials(HubConfig(repo_id=REPO, endpoint=endpoint))  # a write token passes


def test_a_private_model_is_never_pushed_to_an_existing_public_repo(hub, monkeypatch, tmp_path):
    """hub.private (the default) and a repo someone made public: refused before the run and at the push, nothing
    sent; with hub.private false the same repo takes the push."""
    from tests.fake_hub import Commit, Repo

    fake, endpoint = hub
    online(monkeypatch)
    public = "reviews-team/public-sentiment"
    fake.repos[public] = Repo(private=False, commits=[Commit("0" * 40, "initial", {"README.md": b"# public"})])
    with pytest.raises(HubPushError, match=r"hub\.private is true but reviews-team/public-sentiment exists and is"):
        check_credentials(HubConfig(repo_id=public, endpoint=endpoint))
    (tmp_path / "config.json").write_text("{}")
    sent = len(fake.requests)
    with pytest.raises(HubPushError, match="exists and is public"):
        push_folder(str(tmp_path), HubConfig(repo_id=public, endpoint=endpoint), "run-1", "a model")
    assert not [r for r in fake.requests[sent:] if r[0] == "POST"]
    check_credentials(HubConfig(repo_id=public, endpoint=endpoint, private=False))


def test_a_missing_token_or_an_offline_hub_is_refused_before_the_run(monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(HubPushError, match=r"\$HF_TOKEN is empty"):
        check_credentials(HubConfig(repo_id=REPO))
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    with pytest.raises(HubPushError, match="HF_HUB_OFFLINE=1"):  # conftest's session setting
        check_credentials(HubConfig(repo_id=REPO))


def run_cli(tiny_bert_dir, workdir, endpoint, *extra, token=TOKEN):
    """The run fine-tunes a model read from a folder URL: file:// is TF's local filesystem behind the same copy a
    gs:// folder goes through (no GCS endpoint can be faked for TF's own GCS client)."""
    env = {**os.environ, **XET_OFF, "HF_HUB_OFFLINE": "0", "HF_TOKEN": token}
    command = tiny_run_command(
        f"file://{tiny_bert_dir}", workdir, "--set", f"hub.repo_id={REPO}", "--set", f"hub.endpoint={endpoint}",
        "--set", "hub.license=apache-2.0", "--set", "hub.language=[en]", *extra, train=128,
    )  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=900, check=False)


@pytest.mark.e2e
def test_hftfx_run_pushes_the_blessed_model_and_its_card_and_an_unblessed_one_never(hub, tiny_bert_dir, tmp_path):
    fake, endpoint = hub
    summary_path = tmp_path / "summary.json"
    done = run_cli(tiny_bert_dir, tmp_path, endpoint, "--summary-json", str(summary_path))
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(summary_path.read_text())
    assert summary["blessed"] is True

    repo = fake.repos[REPO]
    (commit,) = repo.commits
    files = repo.files_at(commit.oid)
    local = Path(summary["hf_model_dir"])
    assert set(files) == {p.name for p in local.iterdir()}  # the export, model.safetensors and the card included
    assert files["model.safetensors"] == (local / "model.safetensors").read_bytes()  # through git-LFS
    assert json.loads(files["config.json"])["id2label"] == {"0": "rotten", "1": "fresh"}
    card = parse_card(files["README.md"].decode())
    assert card.data.license == "apache-2.0" and card.data.language == ["en"]
    assert {r.metric_type: r.metric_value for r in card.data.eval_results}["accuracy"] == round(
        summary["metrics"]["accuracy"], 4
    )
    assert set(fake.validated_cards) == {files["README.md"].decode()}  # the Hub's own metadata check saw it first
    assert run_tag(summary["run_id"]) in repo.tags and repo.tags[run_tag(summary["run_id"])][0] == commit.oid
    assert f"@{run_tag(summary['run_id'])} ({commit.oid})" in summary["hub_revision"]
    assert "hub           http://127.0.0.1" in done.stdout
    assert f"model 'file://{tiny_bert_dir}'" in done.stderr + done.stdout  # trained from the copied folder

    # A threshold no model meets: not blessed, so nothing reaches the Hub.
    # (The first model is its baseline; intervals, beside the point here, are left out: 20 s of jackknife.)
    blocked = run_cli(
        tiny_bert_dir, tmp_path, endpoint, "--min-auc", "1.0", "--set", "evaluation.confidence_intervals=never"
    )
    assert blocked.returncode == 0, blocked.stderr[-3000:]
    assert "NOT blessed" in blocked.stdout
    assert len(repo.commits) == 1 and len(repo.tags) == 1


@pytest.mark.parametrize(
    ("token", "message"),
    [
        ("", "$HF_TOKEN is empty"),
        # the read-only answer is checked in process above; through the CLI with --slow (a process start, ~20 s)
        pytest.param(READ_TOKEN, "is read-only", marks=pytest.mark.slow),
    ],
)
def test_hftfx_run_without_a_write_token_stops_before_any_component(hub, tiny_bert_dir, tmp_path, token, message):
    _, endpoint = hub
    done = run_cli(tiny_bert_dir, tmp_path, endpoint, token=token)
    assert done.returncode == 2
    assert message in done.stderr
    assert not (tmp_path / "pipeline").exists()  # no component ran
    assert not (tmp_path / "root").exists()  # nothing ran, nothing was written


def test_the_fake_hub_refuses_a_card_whose_model_index_is_broken(hub, monkeypatch):
    """The fake's validate-yaml route is not a yes-machine: huggingface_hub's own upload fails on bad metadata."""
    from huggingface_hub import HfApi

    fake, endpoint = hub
    online(monkeypatch)
    api = HfApi(endpoint=endpoint, token=TOKEN)
    api.create_repo("team/broken-card", exist_ok=True)
    broken = "---\nmodel-index:\n- name: x\n  results:\n  - task: {}\n---\ntext\n"
    with pytest.raises(ValueError, match="Invalid metadata"):
        api.upload_file(path_or_fileobj=broken.encode(), path_in_repo="README.md", repo_id="team/broken-card")
    assert not fake.repos["team/broken-card"].commits
