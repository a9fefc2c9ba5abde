"""benchmarks/reference.json: the figures `make bench` measured, as data. BENCHMARKS.md's `make bench` part is
rendered from it, pipeline/machine/estimate.py and README's headline read it; no figure is typed twice.

`python -m benchmarks.reference` renders BENCHMARKS.md's part again from the file (a test keeps them equal).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.sections import with_preamble

REFERENCE = Path(__file__).parent / "reference.json"
BENCHMARKS_MD = Path(__file__).parent.parent / "BENCHMARKS.md"


def read() -> dict[str, Any]:
    return json.loads(REFERENCE.read_text(encoding="utf-8")) if REFERENCE.is_file() else {"written_by": "make bench"}


def write(reference: dict[str, Any]) -> None:
    REFERENCE.write_text(json.dumps(reference, indent=2) + "\n", encoding="utf-8")


def render_bench(bench: dict[str, Any]) -> str:
    """The part of BENCHMARKS.md before its first `## ` section: `make bench`'s table."""
    lines = [
        "# Benchmarks",
        "",
        f"Written by `make bench` on {bench['machine']} in {bench['seconds']:.0f} s. Each ratio compares two things "
        "measured in the same run on the same data.",
        "",
        "| what | measured | baseline | ratio |",
        "| --- | --- | --- | --- |",
    ]
    lines += [f"| {r['name']} | {r['value']} | {r['baseline']} | {r['ratio']} |" for r in bench["rows"]]
    return "\n".join(lines) + "\n"


def render_into(path: Path = BENCHMARKS_MD) -> None:
    """BENCHMARKS.md with its `make bench` part rendered from reference.json (other targets' sections kept)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    path.write_text(with_preamble(text, render_bench(read()["bench"])), encoding="utf-8")


if __name__ == "__main__":
    render_into()
    print(f"{BENCHMARKS_MD} rendered from {REFERENCE}")
