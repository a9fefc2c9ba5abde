"""`make bench-workers`: the Trainer on two workers against one, on this machine, as Vertex AI runs its CustomJob.

A local run of the packaged MiniLM gives the Trainer's inputs; then the CustomJob's container command runs alone
(global batch 32) and as two replicas with TF_CONFIG (16 per replica: the same global batch), ring all-reduce over
gRPC on localhost. Both workers share this machine's cores, so two cannot be faster here: what the table shows is
what a worker keeps of the peak it measures beside the other, and what the all-reduce costs per step. That cost is
also measured alone: two processes all-reducing a tensor the size of the model's gradients, as the strategy does.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import reference

SECTION = "## Training on several workers: two against one on this machine (`make bench-workers`)"
MODEL = "packaged:all-MiniLM-L6-v2"
GLOBAL_BATCH = 32
STEP_LINE = re.compile(
    r"step (\d+)/(\d+) .*\| ([\d.]+) examples/s \| model ([\d.]+) GFLOP/s = (\d+)% of peak \| (\d+)s training"
)
PEAK_LINE = re.compile(r"float32 matmul peak ([\d,]+) GFLOP/s")


def local_run(workdir: Path, model: str, train: int) -> Path:
    """A local run whose ML Metadata holds the Trainer's inputs."""
    command = [
        sys.executable, "-m", "pipeline.cli", "run", "--model", model, "--pipeline-root", str(workdir / "root"),
        "--serving-dir", str(workdir / "serving"), "--train-limit", str(train), "--eval-limit", "64",
        "--test-limit", "96", "--epochs", "1", "--batch-size", str(GLOBAL_BATCH), "--min-accuracy", "0",
        "--min-auc", "0",
    ]  # fmt: skip
    print(f"[bench-workers] local run of {model} on {train} texts for the Trainer's inputs", flush=True)
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return workdir / "root" / "metadata.sqlite"


def last_step(log: Path) -> dict:
    """The final progress line of a Trainer log: examples/s over all workers, model GFLOP/s, share of peak."""
    text = log.read_text()
    *_, last = STEP_LINE.findall(text)
    (peak,) = PEAK_LINE.findall(text)[:1]
    return {
        "examples_per_second": float(last[2]),
        "gflops": float(last[3]),
        "share": int(last[4]) / 100,
        "peak": float(peak.replace(",", "")),
        "step_seconds": GLOBAL_BATCH / float(last[2]),  # both runs step through global batches of GLOBAL_BATCH
    }


def trainer_jobs(sqlite: Path, workdir: Path) -> dict[str, dict]:
    from tests import trainer_cluster

    recorded = trainer_cluster.recorded_trainer_inputs(sqlite)
    return {
        f"{workers}": trainer_cluster.trainer_custom_job(
            recorded, workdir / f"workers-{workers}", workers, batch_size=GLOBAL_BATCH // workers, log_every_steps=5
        )
        for workers in (1, 2)
    }


def train(jobs: dict[str, dict], workdir: Path) -> dict[str, list[dict]]:
    from tests import trainer_cluster

    measured = {}
    for workers, job in jobs.items():
        logs = workdir / f"logs-{workers}"
        print(f"[bench-workers] the Trainer on {workers} worker(s)", flush=True)
        replicas = trainer_cluster.start_replicas(job, logs)
        codes = [replica.wait() for replica in replicas]
        if any(codes):
            raise SystemExit(f"a replica failed ({codes}); see {logs}")
        measured[workers] = [last_step(logs / f"replica-{n}.log") for n in range(len(replicas))]
    return measured


def all_reduce_worker(size: int, rounds: int) -> None:
    """One of the two processes: MultiWorkerMirroredStrategy's ring all-reduce of `size` floats, timed."""
    import tensorflow as tf

    from models.hardware.distribution import multi_worker_strategy

    strategy = multi_worker_strategy(gpus=False)
    with strategy.scope():
        gradient = tf.Variable(tf.ones([size]))

    @tf.function
    def reduce_once():
        return strategy.run(lambda: tf.distribute.get_replica_context().all_reduce("sum", gradient * 1.0))

    for _ in range(3):
        reduce_once()
    started = time.perf_counter()
    for _ in range(rounds):
        reduce_once()
    print(json.dumps({"seconds": (time.perf_counter() - started) / rounds}), flush=True)


def all_reduce_seconds(size: int, rounds: int = 10) -> float:
    from tests.trainer_cluster import replica_environments

    environments = replica_environments([{"replica_count": 1}, {"replica_count": 1}])
    command = [sys.executable, "-m", "benchmarks.workers", "--all-reduce-worker", str(size), str(rounds)]
    processes = [
        subprocess.Popen(
            command, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        for env in environments
    ]
    times = [json.loads(p.communicate()[0].strip().splitlines()[-1])["seconds"] for p in processes]
    return max(times)


def parse_args(argv: list[str] | None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=960, help="training texts (960: 30 steps at batch 32)")
    parser.add_argument("--model", default=MODEL, help=f"the model trained (default {MODEL})")
    parser.add_argument("--out", default=str(reference.BENCHMARKS_MD))
    parser.add_argument("--all-reduce-worker", nargs=2, type=int, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.all_reduce_worker:
        all_reduce_worker(*args.all_reduce_worker)
        return 0
    from models.hub.pretrained import resolve_model_dir
    from pipeline.machine.estimate import trained_parameters

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-workers-") as scratch:
        workdir = Path(scratch)
        measured = train(trainer_jobs(local_run(workdir, args.model, args.train), workdir), workdir)
    parameters = trained_parameters(resolve_model_dir(args.model))
    print(f"[bench-workers] ring all-reduce of {parameters:,} floats between two processes", flush=True)
    section = workers_section(args, measured, parameters, all_reduce_seconds(parameters), started)
    reference.publish_sections([section], Path(args.out))
    return 0


def workers_section(args, measured: dict, parameters: int, reduce_seconds: float, started: float) -> str:
    """BENCHMARKS.md's table: one worker against two, each replica's rate, peak and all-reduce share."""
    (alone,) = measured["1"]
    rows = [["1 (global batch 32)", "the only one", *_cells(alone), "-"]]
    for n, worker in enumerate(measured["2"]):
        role = "chief" if n == 0 else "worker 0"
        rows.append(
            [
                "2 (16 per replica)", role, *_cells(worker),
                f"{reduce_seconds:.2f} s ({reduce_seconds / worker['step_seconds']:.0%} of its step)",
            ]
        )  # fmt: skip
    two = measured["2"][0]["examples_per_second"]
    return reference.table_section(
        SECTION,
        [
            f"{args.model}, {args.train} training texts, one epoch, fp32, the Trainer's CustomJob command as Vertex AI "
            "runs it (TF_CONFIG per replica, MultiWorkerMirroredStrategy, ring all-reduce over gRPC on localhost). "
            "Both workers share this machine's 2 cores: each measures its peak while the other runs, so the peak "
            f"column is what it had. Two workers train {two / alone['examples_per_second']:.2f}x the examples/s of one "
            f"here. Ran in {time.monotonic() - started:.0f} s.",
        ],
        ["workers", "replica", "examples/s (all workers)", "its peak (GFLOP/s fp32)", "its model GFLOP/s",
         "share of its peak", "s per step", "all-reduce of the gradients per step"],
        ["---", "---", "---:", "---:", "---:", "---:", "---:", "---:"],
        rows,
        notes=[
            f"All-reduce measured alone: two processes all-reduce {parameters:,} float32 "
            f"({4 * parameters / 1e6:.0f} MB, the gradients with the embedding table's made dense) with the "
            "strategy's ring, 10 rounds after 3 "
            "warm-ups; on Vertex AI it crosses the machines' network instead of localhost (pipeline/cloud/cost.py "
            "estimates it from the machine family's bandwidth)."
        ],
    )  # fmt: skip


def _cells(measured: dict) -> list[str]:
    return [
        f"{measured['examples_per_second']:.1f}", f"{measured['peak']:.0f}", f"{measured['gflops']:.1f}",
        f"{measured['share']:.0%}", f"{measured['step_seconds']:.2f}",
    ]  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
