"""The monitor's HTML page: every window `hftfx monitor` checked for one model version, over time.

Built from the JSON reports in one folder (monitor.report_path puts a version's there), so it needs nothing but
them: the newest window's checks, each check's distance as a share of its threshold window after window (past
1, it moved), the accuracy estimated without labels with its interval, and a table of the windows. Rewritten
each time the monitor runs; the run report's style (pipeline/reporting/html_page.py).
"""

from __future__ import annotations

import datetime
import html
import json
from pathlib import Path

import matplotlib.pyplot as plt

from pipeline.reporting.html_page import png, table, write_page

PAGE_FILE = "report.html"


def read_reports(folder: str | Path) -> list[dict]:
    """The folder's monitor reports, oldest first; files that are not one are left out."""
    reports = []
    for path in sorted(Path(folder).glob("*.json")):
        try:
            report = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(report, dict) and {"checks", "last", "verdict"} <= set(report):
            reports.append(report)
    return reports


def _when(report: dict) -> datetime.datetime:
    return datetime.datetime.fromisoformat(report["last"])


def _newest(report: dict) -> str:
    rows = [
        [
            check["name"],
            check["measure"],
            "n/a" if check["value"] is None else f"{check['value']:.3f}",
            f"{check['threshold']:.3f}",
            f"{check['in_domain']:.3f}",
            "moved" if check["moved"] else "",
        ]
        for check in report["checks"]
    ]
    header = ["check", "measure", "this window", "threshold", "between training splits", ""]
    return (
        f'<p class="verdict {str(not report["drift"]).lower()}">{html.escape(report["verdict"])}</p>'
        f"<p>{report['rows']:,} served rows from {html.escape(report['first'])} to {html.escape(report['last'])}, "
        f"against run {html.escape(report['reference_run'])}'s training data.</p>" + table(header, rows)
    )


def _checks_plot(reports: list[dict]) -> str:
    figure, axis = plt.subplots(figsize=(9, 4))
    names = [check["name"] for check in reports[-1]["checks"]]
    for name in names:
        points = [
            (_when(r), c["value"] / c["threshold"])
            for r in reports
            for c in r["checks"]
            if c["name"] == name and c["value"] is not None and c["threshold"] > 0
        ]
        if points:
            axis.plot(*zip(*points, strict=True), marker="o", label=name)
    axis.axhline(1.0, color="tab:red", linestyle="--", label="threshold")
    axis.set_yscale("symlog", linthresh=1.0)  # linear up to the threshold, then a moved check's scale
    axis.set(ylabel="distance / threshold", xlabel="window end (UTC)")
    axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    figure.autofmt_xdate()
    return png(figure)


def _accuracy_plot(reports: list[dict]) -> str:
    estimated = [(_when(r), r["estimated_accuracy"]) for r in reports if r.get("estimated_accuracy")]
    if not estimated:
        return "<p>No window had an accuracy estimate.</p>"
    figure, axis = plt.subplots(figsize=(9, 3))
    times = [when for when, _ in estimated]
    axis.fill_between(times, [e["low"] for _, e in estimated], [e["high"] for _, e in estimated], alpha=0.25)
    axis.plot(times, [e["value"] for _, e in estimated], marker="o", label="estimated (interval shaded)")
    axis.axhline(estimated[-1][1]["eval_accuracy"], color="grey", linestyle="--", label="measured on the eval split")
    axis.set(ylabel="accuracy", xlabel="window end (UTC)")
    axis.legend(fontsize=8)
    figure.autofmt_xdate()
    return png(figure)


def _windows_table(reports: list[dict]) -> str:
    rows = []
    for report in reversed(reports):
        estimate = report.get("estimated_accuracy")
        accuracy = f"{estimate['value']:.3f} ({estimate['low']:.3f}-{estimate['high']:.3f})" if estimate else "n/a"
        rows.append([f"{report['first']} to {report['last']}", f"{report['rows']:,}", report["verdict"], accuracy])
    return table(["window", "rows", "verdict", "estimated accuracy"], rows)


def write_monitor_page(folder: str | Path) -> Path:
    """`folder`/report.html over the folder's reports (the newest first in its table)."""
    reports = read_reports(folder)
    if not reports:
        raise ValueError(f"no monitor report in {folder}")
    version = reports[-1].get("version", "?")
    sections = {
        "newest": ("The newest window", _newest(reports[-1])),
        "checks": ("Checks over windows", _checks_plot(reports)),
        "accuracy": ("Accuracy estimated without labels", _accuracy_plot(reports)),
        "windows": ("Every window", _windows_table(reports)),
    }
    return write_page(Path(folder) / PAGE_FILE, f"model version {version}: served traffic", sections)
