"""Data files in Cloud Storage: listed and read through fsspec, whose Cloud Storage filesystem (gcsfs) is a
declared dependency (datasets reads gs:// with it). The dataset pass runs over a fake of Cloud Storage's JSON
API in a fresh process with a container's credentials (a metadata server), as a cloud ExampleGen reads them.
A fresh process because google-auth fixes the metadata server's address when first imported."""

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.fake_gcs import serve_objects
from tests.fake_vertex import serve_metadata_server

ROOT = Path(__file__).resolve().parents[2]
_READ = """
import json
from components.example_gen.dataset_pass import SAMPLE, dataset_pass
from components.example_gen.config import DatasetConfig

config = DatasetConfig(
    name="csv", data_files=("gs://reviews-bucket/data/*.csv",), text_column="review", label_column="sentiment"
)
found = dataset_pass(config, SAMPLE)
rows = [row.text for rows in found.placed.rows.values() for row in rows]
print(json.dumps({"complete": found.complete, "names": found.label_names, "rows": sorted(rows),
                  "files": found.read.files, "fingerprint": found.read.input_fingerprint}))
"""


def test_gs_data_files_are_read_through_fsspec(monkeypatch):
    reviews = "review,sentiment\n" + "".join(f"review number {i},{'pos' if i % 2 else 'neg'}\n" for i in range(200))
    objects = {"reviews-bucket/data/part-0.csv": reviews.encode(), "reviews-bucket/data/notes.txt": b"not data"}
    runner = "runner@p.iam.gserviceaccount.com"
    with serve_objects(monkeypatch, objects) as asked, serve_metadata_server("p", runner) as metadata:
        env = {**os.environ, "GCE_METADATA_HOST": metadata, "GCE_METADATA_IP": metadata, "HOME": "/nonexistent"}
        env.pop("GOOGLE_APPLICATION_CREDENTIALS", None)
        done = subprocess.run(
            [sys.executable, "-c", _READ], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
        )
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["complete"] and answer["names"] == ["neg", "pos"]
    assert answer["rows"] == sorted(f"review number {i}" for i in range(200))
    assert answer["files"] == {"train": ["gs://reviews-bucket/data/part-0.csv"]}, "listed once, the .txt left out"
    assert len(answer["fingerprint"]) == 32
    assert any(path.startswith("/download/storage/v1/b/reviews-bucket/o/") for path in asked)
