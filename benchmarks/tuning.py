"""`make bench-tuning`: what a Tuner search buys on the default data, and what it costs.

Two whole runs, each in its own process and pipeline root: the default recipe, and the same config with
`tuning.trials` (6) before the Trainer. Compared: the eval split's loss of the model each run exported (the
default recipe's, and the Trainer's trained with the best trial's values) beside the best trial's own score, the
test accuracy and AUC, and the cost as wall seconds x the matmul peak measured in the same run (machines differ by
8x in peak). `--set KEY=VALUE` changes both runs (`dataset.limits.train=3000` for a shorter one).
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

from benchmarks.reference import publish_sections, table_section
from benchmarks.seeds import run_seed
from components.trainer.training_record import describe_values

SECTION = "## Tuning: a 6-trial search before the Trainer against the default recipe (`make bench-tuning`)"


def run(name: str, overrides: list[str], scratch: Path) -> dict:
    summary = run_seed(42, overrides, scratch / name)
    peak = summary["throughput"]["matmul_peak_gflops"]
    training = summary["training"] or {}
    return {
        "name": name,
        "summary": summary,
        "val_loss": (training.get("exported_eval") or {}).get("val_loss", float("nan")),
        "wall_x_peak_tflop": summary["wall_seconds"] * peak / 1e3,
        "peak": peak,
    }


def render(default: dict, tuned: dict, overrides: list[str], seconds: float) -> dict:
    trials = tuned["summary"]["trials"]
    best = trials[0] if trials else {}
    text = (
        f"Measured on {platform.node()} ({os.cpu_count()} cores) in {seconds:.0f} s"
        + (f" with {', '.join(f'`{o}`' for o in overrides)}" if overrides else "")
        + ": the default run, then the same config with a Tuner of "
        f"{len(trials)} trials (KerasTuner's Bayesian oracle over the default search). Eval loss: the eval split's "
        "loss at the epoch the run exported; the best trial's score is the same measure at its own best epoch."
    )
    columns = ["run", "eval loss", "test accuracy", "AUC", "wall s", "peak GFLOP/s", "wall x peak TFLOP"]
    table = []
    for run_ in (default, tuned):
        metrics = run_["summary"]["metrics"]
        table.append([
            run_["name"], f"{run_['val_loss']:.4f}", f"{metrics['accuracy']:.4f}", f"{metrics['auc']:.4f}",
            f"{run_['summary']['wall_seconds']:.0f}", f"{run_['peak']:.0f}", f"{run_['wall_x_peak_tflop']:.0f}",
        ])  # fmt: skip
    shown = describe_values({k: v for k, v in best.items() if k != "trial_id"})
    notes = [
        f"Best trial: {shown}.",
        "Trials (score = eval loss at the trial's best epoch): "
        + "; ".join(f"{t['trial_id']}: {t['score']:.4f}" for t in trials)
        + ".",
        f"The search costs {tuned['wall_x_peak_tflop'] / default['wall_x_peak_tflop']:.1f}x the default run's wall x "
        "peak.",
    ]
    return table_section(SECTION, [text], columns, ["---", *["---:"] * 6], table, notes)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a change to both runs")
    parser.add_argument("--out", default="BENCHMARKS.md")
    args = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-tuning-") as scratch:
        default = run("default recipe", args.set, Path(scratch))
        tuned = run(f"tuned ({args.trials} trials)", [*args.set, f"tuning.trials={args.trials}"], Path(scratch))
    publish_sections([render(default, tuned, args.set, time.monotonic() - started)], Path(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
