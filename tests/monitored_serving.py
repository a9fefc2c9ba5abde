"""A pushed model served with a prediction log, and `hftfx monitor` run on the log, each in a fresh process as a
user runs them: what the monitoring scenarios share."""

from __future__ import annotations

import os
import subprocess
import sys

from tests import vertex_container
from tests.serve_request import FP32

NOTICES = "projects/my-gcp-project/topics/hftfx-serving"  # where `hftfx monitor` publishes a drifted window
CYRILLIC = str.maketrans("abcdefghijklmnopqrstuvwxyz", "абцдефгхийклмнопярстужвьыз")


def split_texts(examples_uri: str, split: str) -> list[str]:
    from components.example_gen.written_examples import read_written

    return read_written(examples_uri, split, 1_000_000)[0]


def in_cyrillic(texts: list[str]) -> list[str]:
    """The same texts in another script: a shift every text check should see."""
    return [text.lower().translate(CYRILLIC) for text in texts]


def served_and_logged(pushed_dir: str, log_dir, texts: list[str]) -> list[str]:
    """`hftfx serve --log-dir` answering `texts` 16 a request; the server's output once it stopped."""
    command = [sys.executable, "-m", "pipeline.cli", "serve", "--log-dir", str(log_dir), *FP32]
    with vertex_container.serving(command, str(pushed_dir)) as container:
        for start in range(0, len(texts), 16):
            status, _ = vertex_container.http_json(container.predict, {"instances": texts[start : start + 16]})
            assert status == 200
    return container.output


def monitored(config, log_dir, *flags: str, pubsub: str = "", env: dict | None = None) -> subprocess.CompletedProcess:
    """`hftfx monitor --logs log_dir` (None: the flags name the source) with the run's pipeline root and serving dir,
    notices to NOTICES at `pubsub`, `env` added to the process's variables."""
    source = ["--logs", str(log_dir)] if log_dir is not None else []
    command = [sys.executable, "-m", "pipeline.cli", "monitor", *source, *flags]
    overrides = ["--set", f"pipeline_root={config.pipeline_root}", "--set", f"serving_dir={config.serving_dir}"]
    notify = ["--set", f"cloud.notify_topic={NOTICES}"] if pubsub else []
    env = {**os.environ, **(env or {}), **({"PUBSUB_EMULATOR_HOST": pubsub} if pubsub else {})}
    return subprocess.run(command + overrides + notify, capture_output=True, text=True, timeout=1800, env=env)


def as_vertex_logs(rows: list[dict]) -> list:
    """Logged rows as a Vertex endpoint writes them to BigQuery: one request of 16 instances per row."""
    import datetime

    from tests.fake_bigquery import LoggedRequest

    answers = [{k: row[k] for k in ("probabilities", "label_id", "label", "confidence")} for row in rows]
    return [
        LoggedRequest(
            "8571", datetime.datetime.fromisoformat(rows[i]["time"]), [r["text"] for r in rows[i : i + 16]],
            answers[i : i + 16],
        )
        for i in range(0, len(rows), 16)
    ]  # fmt: skip
