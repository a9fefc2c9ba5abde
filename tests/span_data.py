"""Span folders of review-like CSV data with a controlled distribution, for retraining tests.

Each text carries two sentiment words of its label among neutral filler, so a tiny BERT learns the task in
one short epoch (and a model trained on shuffled labels learns nothing). Label balance and text length are
parameters: drift tests shift exactly one of them.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

POSITIVE = ("wonderful", "moving", "brilliant", "funny", "charming", "superb", "delightful", "beautiful")
NEGATIVE = ("tedious", "dull", "awful", "boring", "clumsy", "bland", "terrible", "lifeless")
FILLER = ("the", "film", "story", "cast", "plot", "script", "with", "and", "a", "scenes", "director", "its")
LABELS = ("rotten", "fresh")


def reviews(count: int, seed: int, fresh_share: float = 0.5, words: tuple[int, int] = (6, 14)):
    """`count` (text, label) rows; exactly round(count * fresh_share) are fresh."""
    rng = random.Random(seed)
    fresh = round(count * fresh_share)
    labels = ["fresh"] * fresh + ["rotten"] * (count - fresh)
    rng.shuffle(labels)
    rows = []
    for label in labels:
        vocabulary = POSITIVE if label == "fresh" else NEGATIVE
        text = [rng.choice(FILLER) for _ in range(rng.randint(*words))]
        for word in rng.sample(vocabulary, 2):
            text.insert(rng.randrange(len(text) + 1), word)
        rows.append((" ".join(text), label))
    return rows


def shuffled_labels(rows, seed: int):
    """The same texts with labels assigned at random: nothing left to learn."""
    labels = [label for _, label in rows]
    random.Random(seed).shuffle(labels)
    return [(text, label) for (text, _), label in zip(rows, labels, strict=True)]


def write_csv(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        writer.writerows(rows)
    return path


def write_span(data_dir: Path, span: int, rows, marker: str = "_SUCCESS") -> Path:
    """Writes span-<span>/part-0.csv, then the ready marker (the order a real upload uses)."""
    folder = data_dir / f"span-{span}"
    write_csv(folder / "part-0.csv", rows)
    if marker:
        (folder / marker).write_text("")
    return folder


# The "de" rows' own sentiment words: a stand-in for another language that the tiny BERT's English vocab holds as
# whole tokens, so it learns them as quickly as the others and a model can be good on one language and not the other.
POSITIVE_DE = ("excellent", "lovely", "terrific", "gorgeous", "splendid", "magnificent", "sweet", "fine")
NEGATIVE_DE = ("horrible", "poor", "weak", "messy", "dreadful", "shoddy", "stale", "sloppy")


def language_reviews(counts: dict[str, int], seed: int, shuffled: tuple[str, ...] = ()):
    """(text, label, language) rows, counts[language] of each, half fresh; "de" rows use their own sentiment
    words. The labels of the languages in `shuffled` are shuffled among their rows: nothing of them to learn."""
    rng = random.Random(seed)
    rows = []
    for language, count in counts.items():
        fresh_words, rotten_words = (POSITIVE_DE, NEGATIVE_DE) if language == "de" else (POSITIVE, NEGATIVE)
        part = []
        for i in range(count):
            label = LABELS[i % 2]
            text = [rng.choice(FILLER) for _ in range(rng.randint(6, 14))]
            for word in rng.sample(fresh_words if label == "fresh" else rotten_words, 2):
                text.insert(rng.randrange(len(text) + 1), word)
            part.append((" ".join(text), label, language))
        if language in shuffled:
            labels = [label for _, label, _ in part]
            rng.shuffle(labels)
            part = [(text, label, lang) for (text, _, lang), label in zip(part, labels, strict=True)]
        rows.extend(part)
    rng.shuffle(rows)
    return rows


def write_language_csv(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label", "language"])
        writer.writerows(rows)
    return path
