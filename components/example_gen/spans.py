"""Span-versioned data: `{SPAN}` in a file pattern numbers the folders (or files) that match it.

`data/span-{SPAN}/*.csv` makes `data/span-3/a.csv` part of span 3, as TFX's own `{SPAN}` patterns do.
Discovery lists files through input_paths, so local paths and gs:// work alike. A run reads one span,
or a rolling window of the newest N up to it; the concrete files it read are fingerprinted so that a file
changed in place is a different input (and not a cache hit).
"""

from __future__ import annotations

import dataclasses
import logging
import re

from components.example_gen import input_paths
from components.example_gen.config import DatasetConfig
from models.errors import UserError

SPAN_TOKEN = "{SPAN}"


# A span number travels as a pipeline parameter, a JSON number (a double): above 2**53 it would arrive changed.
MAX_SPAN = 2**53 - 1


def span_name(span: int, digits: int = 0) -> str:
    """The one name of a span: its number, zero-padded to `digits` (dataset.span_digits) when that is set."""
    return str(span).zfill(digits)


def span_problem(name: str, digits: int = 0) -> str | None:
    """Why the span digits found in a path cannot name a run, or None. A span has one name (span_name): with
    span-03 and span-\u0663 (an Arabic-Indic three) both read as span 3, any object could pass for a span."""
    if not name.isascii():
        return f"span name '{name}' holds digits other than ASCII 0-9"
    if name != span_name(int(name), digits):
        padding = f"zero-padded to {digits} digits" if digits else "without leading zeros"
        return (
            f"span name '{name}' is not how this dataset names span {int(name)} ('{span_name(int(name), digits)}': "
            f"dataset.span_digits {digits}, {padding})"
        )
    span = int(name)
    if span == 0:
        return (
            "span 0 means 'the newest span' to a run (dataset.span), so a span-0 folder could be trained twice: "
            "number spans from 1"
        )
    if span > MAX_SPAN:
        return (
            f"span {str(span)[:20]}... is above {MAX_SPAN}, the largest a pipeline parameter carries exactly: "
            "number spans with a date or a counter"
        )
    return None


class SpanError(UserError, ValueError):
    """No data for the span asked for; the message names the pattern and what was found."""


def patterns(config: DatasetConfig) -> dict[str, tuple[str, ...]]:
    """Data file patterns by dataset split (`data_files` all belong to 'train')."""
    if config.split_files:
        return {split: tuple(files) for split, files in config.split_files.items()}
    return {"train": tuple(config.data_files)} if config.data_files else {}


def spanned_patterns(config: DatasetConfig) -> list[str]:
    """The file patterns that hold {SPAN}, in the config's order."""
    return [p for files in patterns(config).values() for p in files if SPAN_TOKEN in p]


def is_spanned(config: DatasetConfig) -> bool:
    return bool(spanned_patterns(config))


def _pattern_regex(pattern: str) -> re.Pattern:
    """`data/span-{SPAN}/*.csv` -> a regex whose group 1 is the span's digits."""
    parts = re.split(r"(\{SPAN\}|\*\*|\*|\?)", pattern)
    wildcard = {SPAN_TOKEN: r"(\d+)", "**": r".*", "*": r"[^/]*", "?": r"[^/]"}
    return re.compile("".join(wildcard.get(part, re.escape(part)) for part in parts) + r"\Z")


def span_dir(pattern: str, span_digits: str) -> str:
    """The folder whose name carries the span: where its ready marker lives."""
    head = pattern.split(SPAN_TOKEN, 1)[0]
    rest = pattern.split(SPAN_TOKEN, 1)[1].split("/", 1)[0]
    return f"{head}{span_digits}{rest}"


def span_of_path(config: DatasetConfig, path: str) -> str | None:
    """The span a file belongs to, as its path names it (span_problem says whether that name is one), or None
    if it is not span data (or, with a marker, not the marker)."""
    ready_marker = config.ready_marker
    for files in patterns(config).values():
        for pattern in files:
            if SPAN_TOKEN not in pattern:
                continue
            if ready_marker:
                marker = _pattern_regex(f"{span_dir(pattern, SPAN_TOKEN)}/{ready_marker}").match(path)
                if marker:
                    return marker.group(1)
            elif match := _pattern_regex(pattern).match(path):
                return match.group(1)
    return None


def available_spans(config: DatasetConfig) -> dict[int, dict[str, list[str]]]:
    """Every span with data: span -> pattern -> its files. With a marker, only spans whose folder holds it."""
    ready_marker = config.ready_marker
    found: dict[int, dict[str, list[str]]] = {}
    for files in patterns(config).values():
        for pattern in files:
            if SPAN_TOKEN not in pattern:
                continue
            regex = _pattern_regex(pattern)
            for path in _glob(pattern.replace(SPAN_TOKEN, "*")):
                match = regex.match(path)
                if not match:
                    continue
                if problem := span_problem(match.group(1), config.span_digits):
                    logging.warning("ignoring %s: %s", path, problem)
                    continue
                if ready_marker and not input_paths.exists(f"{span_dir(pattern, match.group(1))}/{ready_marker}"):
                    continue
                found.setdefault(int(match.group(1)), {}).setdefault(pattern, []).append(path)
    return dict(sorted(found.items()))


def _glob(pattern: str) -> list[str]:
    try:
        return input_paths.matched_files(pattern)
    except Exception as error:  # any filesystem's failure to list: its reason, and how to need no listing
        raise SpanError(
            f"could not list {pattern}: {str(error).splitlines()[0] if str(error) else type(error).__name__}. "
            "Check the path and your access to it, or name the span to use (--span N) so nothing has to be listed."
        ) from error


@dataclasses.dataclass(frozen=True)
class SpanSelection:
    """What one run reads: the span it is named after, the window of spans, and the concrete files."""

    span: int
    window: tuple[int, ...]
    config: DatasetConfig  # patterns replaced by the concrete files of the window; span set
    listed: frozenset[str] = frozenset()  # the window's files, found by listing: no need to list them again


def select(config: DatasetConfig) -> SpanSelection:
    """Resolves `config.span` (0 = newest) and `config.span_window` into concrete files."""
    ready_marker = config.ready_marker
    available = available_spans(config)
    shown = spanned_patterns(config)
    if not available:
        marker = f" with a '{ready_marker}' marker in the span folder" if ready_marker else ""
        raise SpanError(f"no span found for {shown}{marker}; add data such as {span_dir(shown[0], '1')}/")
    span = config.span or max(available)
    if span not in available:
        raise SpanError(f"span {span} has no data under {shown}; available spans: {sorted(available)}")
    window = tuple(s for s in sorted(available) if s <= span)[-config.span_window :]
    resolved, listed = {}, set()
    for split, files in patterns(config).items():
        concrete: list[str] = []
        for pattern in files:
            if SPAN_TOKEN in pattern:
                found = [f for s in window for f in available[s].get(pattern, [])]
                concrete += found
                listed.update(found)
            else:
                concrete.append(pattern)
        if not concrete:
            raise SpanError(f"split '{split}' has no files in spans {list(window)} (patterns {list(files)})")
        resolved[split] = tuple(concrete)
    if config.split_files:
        concrete_config = config.model_copy(update={"split_files": resolved, "span": span})
    else:
        concrete_config = config.model_copy(update={"data_files": resolved["train"], "span": span})
    return SpanSelection(span=span, window=window, config=concrete_config, listed=frozenset(listed))
