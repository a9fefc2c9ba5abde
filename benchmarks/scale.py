"""`make bench-scale`: how the data path's cost grows with the number of rows.

Synthetic review CSVs of each size (shards of at most SHARD_ROWS rows, words drawn from the packaged corpus,
two labels) go through the preflight's checks and choices ("probe" below), then ExampleGen -> StatisticsGen ->
SchemaGen -> ExampleValidator -> Transform -> TransformedStatisticsGen under LocalDagRunner, once per DirectRunner
mode, each run in a fresh process. Per size and mode: rows, seconds, seconds per 1k rows, the launching process's
peak memory (its own ru_maxrss: what grows if rows were held in the driver) and the whole process tree's peak
(sampled), with growth ratios between sizes. The Trainer is left out: it reads the Transform's TFRecords batch by
batch, so its cost is per step, not per dataset row.
Results replace the "Scale" section of BENCHMARKS.md (`make bench` keeps it).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.reference import publish_sections, table_section
from pipeline.config.pipeline_config import MULTI_PROCESSING_BEAM_ARGS, PipelineConfig

SHARD_ROWS = 100_000
SECTION = "## Scale: the data components as the rows grow (`make bench-scale`)"
MODES = {"in_memory": list(PipelineConfig().beam_args), "multi_processing": list(MULTI_PROCESSING_BEAM_ARGS)}


def write_dataset(folder: Path, rows: int, seed: int = 0) -> str:
    """Reviews of 5-40 words drawn from the packaged corpus's vocabulary; returns the shards' glob."""
    import numpy as np

    from components.example_gen.sources import rotten_tomatoes_reviews

    vocabulary = sorted({w for text in rotten_tomatoes_reviews()["text"] for w in text.lower().split()})
    words = np.array(vocabulary)
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for shard, start in enumerate(range(0, rows, SHARD_ROWS)):
        count = min(SHARD_ROWS, rows - start)
        lengths = rng.integers(5, 41, count)
        picks = rng.integers(0, len(words), lengths.sum())
        labels = rng.integers(0, 2, count)
        with open(folder / f"reviews-{shard:05d}.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["text", "label"])
            offset = 0
            for length, label in zip(lengths, labels, strict=True):
                writer.writerow([" ".join(words[picks[offset : offset + length]]), ("neg", "pos")[label]])
                offset += length
    return str(folder / "reviews-*.csv")


def run_data_components(pattern: str, root: str, mode: str) -> dict:
    """In this process (the launching one): the preflight's checks and choices, then the data components; returns
    seconds per component."""
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    from tfx.orchestration import metadata
    from tfx.orchestration import pipeline as tfx_pipeline
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner

    from components.local_beam import local_beam_runner
    from pipeline.config.node_ids import TRAINER
    from pipeline.config.pipeline_config import load_config
    from pipeline.orchestration.choose import choose
    from pipeline.orchestration.dag import create_components
    from pipeline.orchestration.preflight import check_model_and_data

    config = load_config(
        overrides={
            "dataset.name": "csv",
            "dataset.data_files": [pattern],
            "dataset.label_names": ["neg", "pos"],
            "pipeline_root": root,
            "serving_dir": f"{root}/serving",
        }
    )
    sqlite = f"{root}/metadata.sqlite"
    with local_beam_runner():
        started = time.monotonic()
        chosen = choose(check_model_and_data(config))
        probe_seconds = time.monotonic() - started
        components = create_components(chosen.config)
        components = components[: [c.id for c in components].index(TRAINER)]  # the data components, in DAG order
        LocalDagRunner().run(
            tfx_pipeline.Pipeline(
                pipeline_name="bench-scale",
                pipeline_root=root,
                components=components,
                metadata_connection_config=metadata.sqlite_metadata_connection_config(sqlite),
                beam_pipeline_args=MODES[mode],
            )
        )
    seconds = {"probe": probe_seconds, **component_seconds(sqlite)}
    return {"seconds": seconds, "driver_peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def component_seconds(sqlite: str) -> dict[str, float]:
    from pipeline.reporting.metadata_reader import node_name, open_store

    store = open_store(sqlite)
    out = {}
    for execution in store.get_executions():
        name = node_name(store, execution, "bench-scale")
        out[name] = (execution.last_update_time_since_epoch - execution.create_time_since_epoch) / 1e3
    return out


def tree_rss(pid: int) -> int:
    import psutil

    try:
        parent = psutil.Process(pid)
        return sum(p.memory_info().rss for p in [parent, *parent.children(recursive=True)])
    except psutil.Error:
        return 0


def run_sampled(command: list[str]) -> tuple[float, int]:
    """Runs `command` in a fresh process; (wall seconds, peak RSS of its whole process tree, sampled)."""
    started = time.monotonic()
    child = subprocess.Popen(command)
    peak = 0
    done = threading.Event()

    def sample():
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss(child.pid))
            done.wait(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    code = child.wait()
    done.set()
    sampler.join()
    if code:
        raise SystemExit(f"bench-scale: {' '.join(command[:6])} ... failed (exit {code})")
    return time.monotonic() - started, peak


def measure(pattern: str, mode: str, scratch: Path) -> dict:
    """Runs one size in a fresh process; samples the whole process tree's memory while it runs."""
    root = tempfile.mkdtemp(dir=scratch, prefix=f"{mode}-")
    out = Path(root) / "result.json"
    wall, peak = run_sampled([sys.executable, "-m", "benchmarks.scale", "--child", pattern, root, mode, str(out)])
    result = json.loads(out.read_text())
    result.update(wall_seconds=wall, tree_peak_bytes=peak)
    return result


def measure_prediction(pattern: str, model: str, scratch: Path) -> dict:
    """`hftfx predict --input` over the shards in a fresh process: rows/s and the process tree's peak memory."""
    output = Path(tempfile.mkdtemp(dir=scratch, prefix="predict-")) / "scored.jsonl"
    command = [sys.executable, "-m", "pipeline.cli", "predict", "--model", model, "--input", pattern]
    wall, peak = run_sampled([*command, "--output", str(output), "--id-columns", "label"])
    with output.open(encoding="utf-8") as handle:
        rows = sum(1 for _ in handle)
    return {"rows": rows, "wall_seconds": wall, "tree_peak_bytes": peak}


PREDICT_SECTION = "## Scale: batch prediction as the rows grow (`make bench-scale`)"
TINY = "tiny"  # --model: a tiny BERT pushed by a tiny run in the scratch folder


def tiny_pushed_model(scratch: Path) -> str:
    """A tiny BERT (2 layers, hidden 64) fine-tuned and pushed by a tiny `hftfx run`: memory against rows does
    not depend on the model's size, and MiniLM's ~160 rows/s here would take 9 hours over 5M rows."""
    from tests.tiny_model import tiny_run_command, write_tiny_bert

    work = Path(tempfile.mkdtemp(dir=scratch, prefix="tiny-"))
    summary = work / "summary.json"
    command = tiny_run_command(write_tiny_bert(work / "tiny-bert"), work, "--summary-json", str(summary))
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return json.loads(summary.read_text())["pushed_dir"]


def render_prediction(results: list[dict], model: str, peak_gflops: float) -> dict:
    shown = "a tiny BERT (2 layers, hidden 64, 32 tokens) pushed by a tiny run" if model == TINY else model
    text = (
        f"`hftfx predict --model <{shown}> --input <CSV shards> --output scored.jsonl` in a fresh process on "
        f"{platform.node()} ({os.cpu_count()} cores, fp32 matmul peak {peak_gflops:,.0f} GFLOP/s), the same "
        "synthetic reviews as above. Wall time includes the process start, the model load and the writes (the "
        "parts appended into one file). Target: the peak flat, at most 1.2x the first size's."
    )
    rows, first = [], results[0] if results else None
    for r in results:
        growth = f"{r['tree_peak_bytes'] / first['tree_peak_bytes']:.2f}x" if r is not first else "-"
        rows.append(
            [
                f"{r['rows']:,}",
                f"{r['wall_seconds']:.0f}",
                f"{r['rows'] / r['wall_seconds']:,.0f}",
                f"{r['tree_peak_bytes'] / 2**30:.2f}",
                growth,
            ]
        )
    columns = ["rows", "wall s", "rows/s", "tree peak GiB", "peak vs the first size"]
    return table_section(PREDICT_SECTION, [text], columns, ["---:"] * len(columns), rows)


def render(results: list[dict], peak_gflops: float, seconds: float) -> dict:
    gib = 2**30
    text = (
        f"Measured on {platform.node()} ({os.cpu_count()} cores, fp32 matmul peak {peak_gflops:,.0f} GFLOP/s) in "
        f"{seconds:.0f} s: synthetic reviews (5-40 words, two labels) in CSV shards of {SHARD_ROWS:,} rows, the "
        "probe then ExampleGen -> StatisticsGen -> SchemaGen -> ExampleValidator -> Transform (tokenized to 64) -> "
        "TransformedStatisticsGen "
        "under LocalDagRunner, "
        "a fresh process per run. Driver: the launching process's own peak RSS; tree: the peak summed over it "
        "and its Beam workers (sampled every 0.5 s). Growth columns compare with the previous size."
    )
    columns = [
        "mode", "rows", "probe s", "ExampleGen s", "StatisticsGen s", "Transform s", "its statistics s", "wall s",
        "s per 1k rows", "driver peak GiB", "tree peak GiB", "driver growth", "s/row growth",
    ]  # fmt: skip
    rows: list[list[str]] = []
    previous: dict[str, dict] = {}
    for r in results:
        s = r["seconds"]
        per_k = r["wall_seconds"] / r["rows"] * 1e3
        before = previous.get(r["mode"])
        growth = (
            (f"{r['driver_peak_bytes'] / before['driver_peak_bytes']:.2f}x", f"{per_k / before['per_k']:.2f}x")
            if before
            else ("-", "-")
        )
        steps = ("probe", "HFDatasetExampleGen", "StatisticsGen", "Transform", "TransformedStatisticsGen")
        memory = (r["driver_peak_bytes"] / gib, r["tree_peak_bytes"] / gib)
        rows.append(
            [
                r["mode"],
                f"{r['rows']:,}",
                *(f"{s.get(step, 0):.1f}" for step in steps),
                f"{r['wall_seconds']:.0f}",
                f"{per_k:.2f}",
                *(f"{gib_used:.2f}" for gib_used in memory),
                *growth,
            ]
        )
        previous[r["mode"]] = {**r, "per_k": per_k}
    return table_section(SECTION, [text], columns, ["---"] + ["---:"] * (len(columns) - 1), rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument(
        "--predict-sizes", default="100000,1000000,5000000", help="rows scored by hftfx predict --input"
    )
    parser.add_argument(
        "--model", default=TINY, help=f"the pushed model batch prediction uses; {TINY}: one a tiny run pushes"
    )
    parser.add_argument("--out", default="BENCHMARKS.md")
    parser.add_argument("--child", nargs=4, metavar=("PATTERN", "ROOT", "MODE", "RESULT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        pattern, root, mode, result = args.child
        Path(result).write_text(json.dumps(run_data_components(pattern, root, mode)))
        return 0
    from models.hardware.machine_peak import matmul_peak

    started = time.monotonic()
    peak = matmul_peak("float32").gflops
    print(f"fp32 matmul peak {peak:,.0f} GFLOP/s", flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as scratch:
        for rows in (int(s) for s in args.sizes.split(",") if s):
            pattern = write_dataset(Path(scratch, f"data-{rows}"), rows)
            for mode in args.modes.split(","):
                print(f"[bench-scale] {rows:,} rows, {mode} ...", flush=True)
                result = {"rows": rows, "mode": mode, **measure(pattern, mode, Path(scratch))}
                print(f"[bench-scale] {rows:,} rows, {mode}: {json.dumps(result)}", flush=True)
                results.append(result)
        predictions = []
        sizes = [int(s) for s in args.predict_sizes.split(",") if s]
        model = tiny_pushed_model(Path(scratch)) if sizes and args.model == TINY else args.model
        for rows in sizes:
            pattern = write_dataset(Path(scratch, f"predict-{rows}"), rows)
            print(f"[bench-scale] hftfx predict, {rows:,} rows ...", flush=True)
            predictions.append(measure_prediction(pattern, model, Path(scratch)))
            shutil.rmtree(Path(pattern).parent)  # 5M rows of CSV: ~0.8 GB
            print(f"[bench-scale] hftfx predict: {json.dumps(predictions[-1])}", flush=True)
    results.sort(key=lambda r: (list(MODES).index(r["mode"]), r["rows"]))
    sections = [render(results, peak, time.monotonic() - started)] if results else []
    if predictions:
        sections.append(render_prediction(predictions, args.model, peak))
    publish_sections(sections, Path(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
