"""benchmarks/reference.json: every figure the bench targets measured, as data; BENCHMARKS.md is rendered from
it whole. No figure is typed twice (the default run's headline, which `hftfx doctor` and README use, is in
pipeline/machine/default_run.json, where the installed package finds it).

`make bench` writes `bench` (its table); `make bench-scale` and `make bench-seeds` each
replace their own entries of `sections` (a heading, the paragraphs that say what was measured on which
machine, a table, notes). `python -m benchmarks.reference` renders BENCHMARKS.md again (a test keeps them equal).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REFERENCE = Path(__file__).parent / "reference.json"
BENCHMARKS_MD = Path(__file__).parent.parent / "BENCHMARKS.md"


def read() -> dict[str, Any]:
    return json.loads(REFERENCE.read_text(encoding="utf-8")) if REFERENCE.is_file() else {"written_by": "make bench"}


def write(reference: dict[str, Any]) -> None:
    REFERENCE.write_text(json.dumps(reference, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def table_section(
    heading: str, text: list[str], columns: list[str], align: list[str], rows: list[list[str]], notes=()
) -> dict[str, Any]:
    """One `## ` section of BENCHMARKS.md as data (cells formatted as they are shown)."""
    return {"heading": heading, "text": text, "columns": columns, "align": align, "rows": rows, "notes": list(notes)}


def record_section(section: dict[str, Any], path: Path = BENCHMARKS_MD) -> None:
    """Replaces the section with the same heading (or appends it), then renders BENCHMARKS.md."""
    reference = read()
    by_heading = {s["heading"]: s for s in reference.get("sections", [])}  # dicts keep their order
    by_heading[section["heading"]] = section
    reference["sections"] = list(by_heading.values())
    write(reference)
    render_into(path)


def publish_sections(sections: list[dict[str, Any]], path: Path = BENCHMARKS_MD) -> None:
    """What a bench target ends with: each section shown, recorded and BENCHMARKS.md rendered, then where."""
    for section in sections:
        print(render_section(section))
        record_section(section, path)
    print(f"written to {path}")


def render_bench(bench: dict[str, Any]) -> str:
    """`make bench`'s part, before the first section."""
    return render_section(
        table_section(
            "# Benchmarks",
            [
                f"Written by `make bench` on {bench['machine']} in {bench['seconds']:.0f} s. Each ratio compares two "
                "things measured in the same run on the same data."
            ],
            ["what", "measured", "baseline", "ratio"],
            ["---"] * 4,
            [[r["name"], r["value"], r["baseline"], r["ratio"]] for r in bench["rows"]],
        )
    )


def render_section(section: dict[str, Any]) -> str:
    lines = [section["heading"], ""]
    for paragraph in section["text"]:
        lines += [paragraph, ""]
    lines += [_row(section["columns"]), _row(section["align"]), *(_row(row) for row in section["rows"])]
    for note in section["notes"]:
        lines += ["", note]
    return "\n".join(lines) + "\n"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def render(reference: dict[str, Any]) -> str:
    parts = [render_bench(reference["bench"]), *(render_section(s) for s in reference.get("sections", []))]
    return "\n".join(parts)


def render_into(path: Path = BENCHMARKS_MD) -> None:
    path.write_text(render(read()), encoding="utf-8")


if __name__ == "__main__":
    render_into()
    print(f"{BENCHMARKS_MD} rendered from {REFERENCE}")
