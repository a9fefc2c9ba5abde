"""BENCHMARKS.md is written by several make targets: `make bench` owns the part before the first `## ` heading,
each other target one `## ` section. Each replaces its own part and keeps the others as they are."""

from __future__ import annotations

from pathlib import Path

HEADING = "## "


def _parts(text: str) -> list[str]:
    """The preamble, then each `## ` section with its heading line (the preamble may be empty)."""
    parts, current = [], []
    for line in text.splitlines(keepends=True):
        if line.startswith(HEADING):
            parts.append("".join(current))
            current = []
        current.append(line)
    parts.append("".join(current))
    return parts


def _join(parts: list[str]) -> str:
    kept = [part.strip("\n") for part in parts if part.strip("\n")]
    return "\n\n".join(kept) + "\n"


def with_preamble(text: str, preamble: str) -> str:
    """`text` with its part before the first `## ` heading replaced by `preamble`."""
    return _join([preamble, *_parts(text)[1:]])


def with_section(text: str, section: str) -> str:
    """`text` with the section whose heading line `section` starts with replaced by it, or appended."""
    heading = section.splitlines()[0]
    parts = _parts(text)
    for index, part in enumerate(parts):
        if index and part.splitlines()[0] == heading:
            parts[index] = section
            return _join(parts)
    return _join([*parts, section])


def write_preamble(path: Path, preamble: str) -> None:
    path.write_text(with_preamble(path.read_text(encoding="utf-8") if path.exists() else "", preamble), "utf-8")


def write_section(path: Path, section: str) -> None:
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    path.write_text(with_section(text, section), encoding="utf-8")
