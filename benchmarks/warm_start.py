"""`make bench-warm-start`: a span retrain started from the blessed model against the same retrain started cold.

The packaged reviews, shuffled once, become a fixed test file and two spans of train data. Per training seed, one
pipeline root: span 1 trained from the pretrained checkpoint (the first run, blessed), then span 2 twice: warm
(training.warm_start: auto, from span 1's blessed model) and cold (never). Compared per run: test accuracy and AUC,
the Trainer's training FLOPs, and its seconds x the matmul peak measured in the same run (machines differ by 8x in
peak, so a time alone means little). `--set KEY=VALUE` changes every run.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.reference import publish_sections, table_section
from benchmarks.seeds import run_in_root

BENCH = "bench-warm-start"

SECTION = (
    "## Warm starts: a span retrain from the blessed model against the same retrain cold (`make bench-warm-start`)"
)


def write_spans(data: Path, span_rows: int, test_rows: int, seed: int = 0) -> None:
    """data/golden.csv and data/span-1, span-2 (with their ready markers) from the packaged reviews."""
    from components.example_gen.sources import rotten_tomatoes_reviews

    reviews = rotten_tomatoes_reviews()
    names = reviews.features["label"].names
    rows = [(text, names[label]) for text, label in zip(reviews["text"], reviews["label"], strict=True)]
    random.Random(seed).shuffle(rows)
    parts = {"golden.csv": rows[:test_rows]}
    for span in (1, 2):
        start = test_rows + (span - 1) * span_rows
        parts[f"span-{span}/part-0.csv"] = rows[start : start + span_rows]
    for name, part in parts.items():
        path = data / name
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["text", "label"])
            writer.writerows(part)
    for span in (1, 2):
        (data / f"span-{span}" / "_SUCCESS").write_text("")


def measured(summary: dict) -> dict:
    throughput, training = summary["throughput"], summary["training"] or {}
    peak = throughput["matmul_peak_gflops"]
    trainer = summary["components"]["Trainer"]
    return {
        "accuracy": summary["metrics"]["accuracy"],
        "auc": summary["metrics"]["auc"],
        "epochs": f"{training.get('epochs_run')} of {training.get('epochs')}",
        "training_tflop": throughput["training_flops"] / 1e12,
        "trainer_seconds": trainer,
        "peak": peak,
        "trainer_x_peak_tflop": trainer * peak / 1e3,
        "warm": training.get("warm", False),
        "learning_rate": training.get("learning_rate"),
    }


def spread(values: list[float]) -> str:
    mean = statistics.fmean(values)
    return f"{mean:.4f} ± {statistics.stdev(values):.4f}" if len(values) > 1 else f"{mean:.4f}"


def render(results: dict[int, dict[str, dict]], args, seconds: float) -> dict:
    text = (
        f"Measured on {platform.node()} ({os.cpu_count()} cores) in {seconds:.0f} s: the packaged reviews as a fixed "
        f"test file of {args.test_rows:,} and two spans of {args.span_rows:,} (eval carved from each), "
        f"training seeds {', '.join(map(str, results))}"
        + (f", with {', '.join(f'`{o}`' for o in args.set)}" if args.set else "")
        + ". Per seed, one pipeline root: span 1 cold, then span 2 warm (from span 1's blessed model) and cold. "
        "Trainer x peak: the Trainer's seconds times the fp32 matmul peak measured in the same run."
    )
    columns = ["seed", "run", "start", "learning rate", "epochs run", "test accuracy", "AUC", "training TFLOP",
               "Trainer s", "peak GFLOP/s", "Trainer x peak TFLOP"]  # fmt: skip
    rows = []
    for seed, runs in results.items():
        for name, m in runs.items():
            rows.append([
                str(seed), name, "warm" if m["warm"] else "cold", f"{m['learning_rate']:.3g}", m["epochs"],
                f"{m['accuracy']:.4f}", f"{m['auc']:.4f}", f"{m['training_tflop']:.1f}", f"{m['trainer_seconds']:.0f}",
                f"{m['peak']:.0f}", f"{m['trainer_x_peak_tflop']:.0f}",
            ])  # fmt: skip
    warm = [runs["span 2 warm"] for runs in results.values()]
    cold = [runs["span 2 cold"] for runs in results.values()]
    flops = statistics.fmean(w["training_tflop"] / c["training_tflop"] for w, c in zip(warm, cold, strict=True))
    cost = statistics.fmean(
        w["trainer_x_peak_tflop"] / c["trainer_x_peak_tflop"] for w, c in zip(warm, cold, strict=True)
    )
    notes = [
        f"Span 2 test accuracy over seeds: warm {spread([w['accuracy'] for w in warm])}, cold "
        f"{spread([c['accuracy'] for c in cold])}; AUC warm {spread([w['auc'] for w in warm])}, cold "
        f"{spread([c['auc'] for c in cold])}.",
        f"The warm retrain costs {flops:.2f}x the cold one's training FLOPs and {cost:.2f}x its Trainer x peak.",
    ]
    return table_section(SECTION, [text], columns, ["---:", "---", "---", *["---:"] * 8], rows, notes)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, nargs="+", default=[42, 1])
    parser.add_argument("--span-rows", type=int, default=2000)
    parser.add_argument("--test-rows", type=int, default=1000)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a change to every run")
    parser.add_argument("--out", default="BENCHMARKS.md")
    args = parser.parse_args(argv)
    started = time.monotonic()
    results: dict[int, dict[str, dict]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-warm-start-") as scratch:
        data = Path(scratch) / "data"
        write_spans(data, args.span_rows, args.test_rows)
        spans = [
            "dataset.name=csv",
            f"dataset.split_files.train={data / 'span-{SPAN}' / '*.csv'}",
            f"dataset.split_files.test={data / 'golden.csv'}",
            "dataset.ready_marker=_SUCCESS",
        ]
        for seed in args.seeds:
            root = Path(scratch) / f"seed-{seed}"
            common = [*spans, f"training.seed={seed}", *args.set]
            runs = {"span 1 cold": run_in_root(root, "span-1", [*common, "dataset.span=1"], BENCH)}
            runs["span 2 warm"] = run_in_root(root, "span-2-warm", [*common, "dataset.span=2"], BENCH)
            cold = [*common, "dataset.span=2", "training.warm_start=never"]
            runs["span 2 cold"] = run_in_root(root, "span-2-cold", cold, BENCH)
            results[seed] = {name: measured(summary) for name, summary in runs.items()}
    publish_sections([render(results, args, time.monotonic() - started)], Path(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
