"""A hub model's files are downloaded only within what a bucket copy takes of each kind: the sizes the Hub reports
are read first (huggingface_hub's model_info, the real client against a fake Hub on 127.0.0.1), and a file past
its cap is refused naming it before a byte of it arrives."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.fake_hub import XET_OFF, Commit, FakeHub, Repo, serve_hub

MODEL = "reviews-team/tiny-bert"
_DOWNLOAD = """
import sys
from models.errors import UserError
from models.hub.pretrained import resolve_model_dir
try:
    print(sorted(p.name for p in resolve_model_dir(sys.argv[1]).iterdir()))
except UserError as error:
    print("refused:", error)
"""


_DOWNLOAD_TREE = """
import json, sys
from models.hub.pretrained import resolve_model_dir
folder = resolve_model_dir(sys.argv[1])
print(json.dumps(sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())))
"""


def _download(hub: FakeHub, tmp_path, script: str = _DOWNLOAD) -> tuple[str, list]:
    with serve_hub(hub) as endpoint:
        env = {**os.environ, "HF_ENDPOINT": endpoint, "HF_HUB_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "0",
               **XET_OFF}  # fmt: skip
        env.pop("HF_TOKEN", None)
        done = subprocess.run(
            [sys.executable, "-c", script, MODEL], capture_output=True, text=True, env=env, timeout=300, check=True
        )
    downloads = [path for method, path, _ in hub.requests if method == "GET" and "/resolve/" in path]
    return done.stdout.strip().splitlines()[-1], downloads


def test_a_file_past_its_cap_is_refused_before_any_is_downloaded(tiny_bert_dir, tmp_path):
    files = {p.name: p.read_bytes() for p in tiny_bert_dir.iterdir()}
    oversized = Repo(False, [Commit("c0ffee" * 6 + "c0ff", "up", files)], declared_sizes={"tokenizer.json": 3 * 10**9})
    said, downloads = _download(FakeHub(repos={MODEL: oversized}), tmp_path)
    assert said == (
        f"refused: {MODEL}'s tokenizer.json is 3,000,000,000 bytes on the hub, over the 200,000,000 a file of its "
        "kind can need: not downloaded"
    )
    assert downloads == []


def test_files_within_their_caps_are_downloaded_at_the_commit_whose_sizes_were_read(tiny_bert_dir, tmp_path):
    files = {p.name: p.read_bytes() for p in tiny_bert_dir.iterdir()}
    repo = Repo(False, [Commit("c0ffee" * 6 + "c0ff", "up", files)])
    said, downloads = _download(FakeHub(repos={MODEL: repo}), tmp_path)
    assert said == str(sorted(files))
    assert downloads and all(f"/resolve/{'c0ffee' * 6}c0ff/" in path for path in downloads)


def test_a_sentence_transformers_model_brings_its_pooling_for_auto_to_follow(packaged_model_dir, tmp_path):
    """all-MiniLM-L6-v2 as the Hub holds it: modules.json and 1_Pooling/config.json come down with the model's
    files (model.pooling: auto reads them), the card and the other modules' folders do not."""
    files = {p.relative_to(packaged_model_dir).as_posix(): p.read_bytes()
             for p in packaged_model_dir.rglob("*") if p.is_file()}  # fmt: skip
    repo = Repo(False, [Commit("c0ffee" * 6 + "c0ff", "up", files)])
    said, _ = _download(FakeHub(repos={MODEL: repo}), tmp_path, _DOWNLOAD_TREE)
    downloaded = json.loads(said)
    assert {"modules.json", "1_Pooling/config.json", "config.json", "model.safetensors"} <= set(downloaded)
    assert "README.md" not in downloaded and not any(name.startswith("2_Normalize/") for name in downloaded)
