"""`make bench-peers`: ours beside what a user would pick instead, on one machine in one run.

Training: our default run (`hftfx run`, a fresh process and pipeline root) and transformers 5's PyTorch `Trainer`
(the reference environment, bin/reference-env; benchmarks/torch_peer.py) on the same packaged model, the same
train split (the one our ExampleGen wrote), and the recipe our run chose (epochs, batch size, learning rate,
warm-up, weight decay, max length), each side then scored on the same test split. Batch scoring: `hftfx predict
--input` with the pushed SavedModel against transformers' text-classification pipeline on our published Hugging Face
folder, over the same reviews. fp32, and bf16 where the CPU computes it natively (AVX512-BF16 or AMX); elsewhere the
section says so. Each precision's matmul peak is measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks.reference import publish_sections, table_section
from benchmarks.seeds import run_in_root

SECTION = "## Peers: ours beside transformers' PyTorch Trainer and pipeline (`make bench-peers`)"
SCORE_ROWS = 5_000
PRECISIONS = {"fp32": "float32", "bf16": "bfloat16"}  # ours -> the matmul peak's dtype


def reference_python() -> str:
    """The reference environment's Python (bin/reference-env builds it once and prints it)."""
    root = Path(__file__).resolve().parent.parent
    built = subprocess.run([str(root / "bin" / "reference-env")], capture_output=True, text=True, check=True)
    return built.stdout.strip()


def write_jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def run_splits(root: Path, label_names: list[str], scratch: Path) -> dict[str, str]:
    """The run's own train and test splits (what its ExampleGen wrote) as JSON lines of text and label id."""
    from components.example_gen.written_examples import read_written
    from pipeline.config import pipeline_config
    from pipeline.reporting.metadata_reader import summarize_all

    config = pipeline_config.load_config(overrides={"pipeline_root": str(root / "runs")})
    (run,) = summarize_all(config.metadata_sqlite, config.pipeline_name, with_metrics=False)[-1:]
    index = {name: i for i, name in enumerate(label_names)}
    paths = {}
    for split in ("train", "test"):
        texts, labels = read_written(run.examples_uri, split, 10**9)
        rows = [{"text": t, "label": index[label]} for t, label in zip(texts, labels, strict=True)]
        paths[split] = write_jsonl(scratch / f"{split}.jsonl", rows)
    return paths


def torch_job(summary: dict, precision: str, splits: dict[str, str], score_texts: str, config) -> dict:
    """What the PyTorch side runs: our run's recipe, as its summary records it (`config`: the run's)."""
    from models.encoders.from_folder import encoder_shape
    from models.hub.pretrained import resolve_model_dir
    from models.training.recipe import choose_recipe

    training = config.training
    directory = resolve_model_dir(config.model.name, config.model.revision)
    model_dir = str(directory)
    model_type = json.loads((directory / "config.json").read_text())["model_type"]
    recipe = choose_recipe(encoder_shape(directory), model_type, training)
    return {
        "model_dir": model_dir,
        "train": splits["train"],
        "test": splits["test"],
        "epochs": summary["training"]["epochs_run"],
        "batch_size": training.batch_size,
        "learning_rate": summary["training"]["learning_rate"],
        "warmup_ratio": recipe.warmup_ratio,
        "weight_decay": training.weight_decay,
        "max_length": int(re.search(r"max_seq_length (\d+)", summary["lengths"])[1]),
        "precision": precision,
        "threads": os.cpu_count() or 1,
        "seed": training.seed,
        "hf_dir": summary["hf_model_dir"],
        "score_texts": score_texts,
    }


def our_scoring(pushed_dir: str, score_texts: str, scratch: Path) -> float:
    """`hftfx predict --input` rows/s over the reviews, in this process (as the command runs it)."""
    from components.scorer.job import run_batch_prediction
    from components.scorer.records import BatchJob
    from pipeline.config.pipeline_config import LOCAL_BEAM_RUNNER

    job = BatchJob(model=pushed_dir, input=score_texts, output=str(scratch / "scored.jsonl"))
    return run_batch_prediction(job, [f"--runner={LOCAL_BEAM_RUNNER}"]).rows_per_second


def measure(precision: str, scratch: Path, score_texts: str, settings: list[str]) -> dict:
    """One precision: our run (the default pooling the first token, with `settings`), the PyTorch Trainer on its
    splits and recipe, both scorers; with the peak."""
    import yaml

    from models.hardware.machine_peak import matmul_peak
    from pipeline.config.pipeline_config import load_config

    root = scratch / precision
    # the first token: what transformers' BertForSequenceClassification pools, so both sides train the same model
    settings = ["model.pooling=first", *settings, f"training.precision={precision}"]
    ours = run_in_root(root, "summary", settings, "bench-peers")
    splits = run_splits(root, ours["label_names"], root)
    overrides = {key: yaml.safe_load(value) for key, value in (s.split("=", 1) for s in settings)}  # as --set reads
    job = torch_job(ours, precision, splits, score_texts, load_config(overrides=overrides))
    print(f"[bench-peers] {precision}: transformers' Trainer on the same splits and recipe", flush=True)
    done = subprocess.run(
        [reference_python(), str(Path(__file__).with_name("torch_peer.py"))],
        input=json.dumps(job), capture_output=True, text=True, check=False,
        env={**os.environ, "PYTHONPATH": "", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"},
    )  # fmt: skip
    if done.returncode:
        raise SystemExit(f"bench-peers: the PyTorch side failed:\n{done.stderr[-3000:]}")
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        "precision": precision,
        "peak": matmul_peak(PRECISIONS[precision]).gflops,
        "ours": {
            "train_examples_per_second": ours["throughput"]["examples_per_second"],
            "utilization": ours["throughput"]["utilization"],
            "accuracy": ours["metrics"]["accuracy"],
            "auc": ours["metrics"]["auc"],
            "score_rows_per_second": our_scoring(ours["pushed_dir"], score_texts, root),
        },
        "theirs": theirs,
        "recipe": {k: job[k] for k in ("epochs", "batch_size", "learning_rate", "warmup_ratio", "max_length")},
    }


def render(results: list[dict], native_bf16: bool, seconds: float, score_rows: int = SCORE_ROWS) -> dict:
    recipe = results[0]["recipe"]
    text = [
        f"Measured on {platform.node()} ({os.cpu_count()} cores) in {seconds:.0f} s. Both sides train the packaged "
        f"MiniLM-L6 on our ExampleGen's train split with our run's recipe ({recipe['epochs']} epoch, batch "
        f"{recipe['batch_size']}, learning rate {recipe['learning_rate']:g}, {recipe['warmup_ratio']:.0%} warm-up, "
        f"texts cut at {recipe['max_length']} tokens) and are scored on the same test split; PyTorch pads each batch "
        "to its longest text and groups texts by length (`train_sampling_strategy=group_by_length`). Scoring: the "
        f"same {score_rows:,} reviews through `hftfx predict --input` and through transformers' text-classification "
        "pipeline (batch 32) on our published folder.",
        "bf16 was measured too: the CPU computes it natively."
        if native_bf16
        else "bf16 not measured: this CPU has neither AVX512-BF16 nor AMX, so both sides would emulate it.",
    ]
    columns = ["precision", "", "ours", "transformers + PyTorch", "ours / theirs"]
    rows = []
    for r in results:
        ours, theirs, p = r["ours"], r["theirs"], r["precision"]
        for name, key, form in (
            ("training examples/s", "train_examples_per_second", "{:.1f}"),
            ("test accuracy", "accuracy", "{:.4f}"),
            ("test AUC", "auc", "{:.4f}"),
            ("scoring rows/s", "score_rows_per_second", "{:.0f}"),
        ):
            ratio = f"{ours[key] / theirs[key]:.2f}x" if "/s" in name else "-"
            rows.append([p, name, form.format(ours[key]), form.format(theirs[key]), ratio])
        share = f"{ours['utilization']:.0%} of {r['peak']:.0f} GFLOP/s"
        rows.append([p, "our step's share of the peak", share, "-", "-"])
    return table_section(SECTION, text, columns, ["---", "---", "---:", "---:", "---:"], rows, [])


def main(argv=None) -> int:
    from benchmarks.bench import corpus
    from models.hardware.cpu_features import cpu_supports_bf16

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="change our run's config")
    parser.add_argument("--score-rows", type=int, default=SCORE_ROWS, help="reviews each side scores")
    parser.add_argument("--out", default="BENCHMARKS.md")
    args = parser.parse_args(argv)
    native_bf16 = cpu_supports_bf16()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as scratch:
        texts = write_jsonl(Path(scratch) / "score.jsonl", [{"text": t} for t in corpus(args.score_rows)])
        precisions = ("fp32", "bf16") if native_bf16 else ("fp32",)
        results = [measure(p, Path(scratch), texts, args.set) for p in precisions]
    section = render(results, native_bf16, time.monotonic() - started, args.score_rows)
    publish_sections([section], Path(args.out))
    for row in section["rows"]:
        print("  ".join(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
