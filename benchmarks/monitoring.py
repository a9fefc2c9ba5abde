"""`hftfx monitor` over a large window: 100,000 logged rows of the pushed default model (the corpus's reviews, each
answered by the model, written by the server's own PredictionLog), checked against the default run's training data
with a labeling queue of 50, in a fresh process as a user runs it. Wall time and that process's peak memory, beside
the fp32 matmul peak measured in the same run."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time

import numpy as np

ROWS = 100_000
UNIQUE = 5_000  # texts answered by the model here; the log repeats them (as traffic repeats itself)
PEAK_PROBE = "import resource, sys; from pipeline.cli import main; code = main(sys.argv[1:]); " + (
    "print(f'peak_kib={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}', file=sys.stderr); sys.exit(code)"
)


def write_log(log_dir: str, version_dir, texts: list[str], rows: int = ROWS) -> None:
    """`rows` answers of the served model as the server logs them, 32 a request."""
    from models.serving.prediction_log import LogSettings, PredictionLog
    from models.serving.pushed_model import load_serving_model, predict_texts

    _, model = load_serving_model(version_dir)
    unique = texts[:UNIQUE]
    answers = []
    for start in range(0, len(unique), 256):
        for p in predict_texts(model, unique[start : start + 256]):
            answers.append({"probabilities": list(p.probabilities), "label_id": p.label_id, "label": p.label})
    log = PredictionLog(LogSettings(log_dir, max_queued_rows=rows), version_dir.name)
    order = np.random.default_rng(0).integers(0, len(unique), rows)
    for start in range(0, rows, 32):
        picked = order[start : start + 32]
        log.record("serving_default", {"text": [unique[i].encode() for i in picked]}, [answers[i] for i in picked])
    log.close(timeout=600)


def measure(run_config, serving_dir: str, texts: list[str]) -> tuple[float, float]:
    """(seconds, peak GiB) of `hftfx monitor --queue 50` over ROWS logged rows."""
    from models.serving.pushed_model import resolve_version_dir

    version_dir = resolve_version_dir(serving_dir)
    with tempfile.TemporaryDirectory(prefix="hftfx-bench-monitor-") as logs:
        write_log(logs, version_dir, texts)
        command = [sys.executable, "-c", PEAK_PROBE, "monitor", "--logs", logs, "--queue", "50"]
        command += ["--model", str(version_dir), "--set", f"pipeline_root={run_config.pipeline_root}"]
        command += ["--set", f"pipeline_name={run_config.pipeline_name}"]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
        seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"hftfx monitor failed: {done.stderr[-2000:]}")
    print(done.stdout, flush=True)
    peak_kib = int(done.stderr.rsplit("peak_kib=", 1)[1].split()[0])
    return seconds, peak_kib / 2**20
