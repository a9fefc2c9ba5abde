"""The pieces the project's HTML pages are made of (`hftfx report`, the monitor's page): one style, tables, plots
as embedded PNGs, so a page is one file that opens anywhere."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

STYLE = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:4px 10px;text-align:right}
th{background:#f3f3f3}td:first-child{text-align:left}img{max-width:100%}.verdict{font-size:1.3em;font-weight:bold}
.verdict.true{color:#17702e}.verdict.false{color:#b3261e}h2{border-bottom:1px solid #ddd;padding-bottom:4px}"""


def png(figure) -> str:
    """The figure as an <img> holding its PNG; the figure is closed."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(figure)
    return f'<img alt="plot" src="data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode()}">'


def table(header: list[str], rows: list[list]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def write_page(output: str | Path, title: str, sections: dict[str, tuple[str, str]]) -> Path:
    """One page: <h1>title</h1>, then each section id -> (its heading, its HTML body) in order."""
    body = "".join(f'<section id="{key}"><h2>{head}</h2>{part}</section>' for key, (head, part) in sections.items())
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(page, encoding="utf-8")
    return output
