"""`make bench-gate`: the blessing gate on the default run, retrained in the same pipeline root.

Three whole default runs, one after another in one pipeline root and ML Metadata store, each in its own process:
seed 42 (the first of its task: judged on the absolute bounds), seed 1 (a retrain of equal quality: with point
comparisons it was refused whenever its AUC came out lower), and seed 2 at a learning rate 100 times too small
(a clearly worse retrain). Each row: the test metrics, the change in AUC against the blessed baseline with its
paired 95% interval, and the decision. `--set KEY=VALUE` changes every run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.reference import publish_sections, table_section

SECTION = "## Gate: a retrain at another seed and a weakened one, judged against the blessed model (`make bench-gate`)"
RUNS = (("seed 42", ["training.seed=42"]), ("seed 1", ["training.seed=1"]))
WEAKENED = ("seed 2, learning rate 1e-6", ["training.seed=2", "training.learning_rate=1e-6"])


def run(name: str, settings: list[str], root: Path) -> dict:
    """One whole `hftfx run` in `root` (shared by every run); its summary."""
    summary = root / f"{name.replace(' ', '-').replace(',', '')}.json"
    command = [sys.executable, "-m", "pipeline.cli", "run", "--summary-json", str(summary)]
    for setting in [f"pipeline_root={root / 'runs'}", f"serving_dir={root / 'serving'}", *settings]:
        command += ["--set", setting]
    print(f"[bench-gate] {name}: {' '.join(command[3:])}", flush=True)
    if subprocess.run(command, check=False).returncode:
        raise SystemExit(f"bench-gate: the run '{name}' failed")
    return json.loads(summary.read_text())


def render(results: list[tuple[str, dict]], overrides: list[str], seconds: float) -> dict:
    text = (
        f"Measured on {platform.node()} ({os.cpu_count()} cores) in {seconds:.0f} s"
        + (f" with {', '.join(f'`{o}`' for o in overrides)}" if overrides else "")
        + ": three default runs in one pipeline root. The change is candidate minus the blessed baseline on the same "
        "test examples; its interval is TFMA's jackknife over 20 partitions, paired (both models on each)."
    )
    columns = ["run", "test accuracy", "AUC", "AUC change vs baseline (95% interval)", "decision"]
    table = []
    for name, summary in results:
        metrics, change = summary["metrics"], summary.get("changes", {}).get("auc")
        shown = f"{change[0]:+.4f} ({change[1]:+.4f} to {change[2]:+.4f})" if change else "none: first of its task"
        decision = ("blessed: " if summary["blessed"] else "refused: ") + summary["blessing_reason"]
        table.append([name, f"{metrics['accuracy']:.4f}", f"{metrics['auc']:.4f}", shown, decision])
    return table_section(SECTION, [text], columns, ["---", "---:", "---:", "---:", "---"], table)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a change to every run")
    parser.add_argument("--out", default="BENCHMARKS.md")
    args = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-gate-") as scratch:
        results = [(name, run(name, [*args.set, *settings], Path(scratch))) for name, settings in (*RUNS, WEAKENED)]
    publish_sections([render(results, args.set, time.monotonic() - started)], Path(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
