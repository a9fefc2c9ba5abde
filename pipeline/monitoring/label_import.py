"""`hftfx label import FILE`: labeled texts (Label Studio's JSON export, or a CSV of text,label) become the next span
of the dataset, so `hftfx trigger` (or a storage event) retrains on them like on any span.

The span is written where the dataset's `{SPAN}` pattern looks (the train split's first spanned pattern), in the
format its files have, then its ready marker when the dataset uses one (last, as a producer must). It is then read
as the span's run will read it (with the spans its dataset.span_window adds), with the ExampleGen's checks; a span
that fails them is removed again, and the export is never changed, so nothing is lost.
"""

from __future__ import annotations

import csv
import fnmatch
import json
from pathlib import Path

from components.example_gen import spans
from models.errors import UserError
from models.names import TEXT_FEATURE, TEXT_PAIR_FEATURE
from pipeline.config.pipeline_config import PipelineConfig

FILE_STEM = "labeled"
FORMATS = (".csv", ".jsonl", ".parquet")


def _annotated_label(task: dict) -> str | None:
    """The choice of the task's last annotation that was not cancelled, or None."""
    for annotation in reversed(task.get("annotations") or []):
        if annotation.get("was_cancelled"):
            continue
        for region in annotation.get("result") or []:
            choices = (region.get("value") or {}).get("choices") or []
            if region.get("type") == "choices" and choices:
                return str(choices[0])
    return None


def read_labeled(path: str | Path) -> tuple[list[dict], int]:
    """({text, label[, text_pair]} rows, tasks without a label) of a Label Studio JSON export or a CSV."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path} is not a file: give Label Studio's JSON export or a CSV with text and label columns")
    if path.suffix.lower() == ".csv":
        with open(path, newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        if rows and not {"text", "label"} <= set(rows[0]):
            raise UserError(f"{path} has columns {sorted(rows[0])}; a labeled CSV needs 'text' and 'label'")
        kept = [row for row in rows if row.get("text") and row.get("label")]
        wanted = ("text", "label", TEXT_PAIR_FEATURE)
        return [{k: v for k, v in row.items() if k in wanted} for row in kept], len(rows) - len(kept)
    try:
        exported = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise UserError(f"{path} is not JSON ({error}): export the Label Studio project as JSON") from None
    if not isinstance(exported, list):
        raise UserError(f"{path} is not a Label Studio export (a JSON list of tasks)")
    rows, unlabeled = [], 0
    for task in exported:
        data = task.get("data") if isinstance(task, dict) else None
        label = _annotated_label(task) if data else None
        if not data or not data.get(TEXT_FEATURE) or label is None:
            unlabeled += 1
            continue
        row = {"text": data[TEXT_FEATURE], "label": label}
        if data.get(TEXT_PAIR_FEATURE):
            row[TEXT_PAIR_FEATURE] = data[TEXT_PAIR_FEATURE]
        rows.append(row)
    return rows, unlabeled


def span_destination(config: PipelineConfig, span: int) -> tuple[Path, Path | None]:
    """(the file a new span's rows go to, its ready marker or None) under the dataset's first spanned pattern."""
    dataset = config.dataset
    spanned = [p for p in spans.patterns(dataset).get("train", ()) if spans.SPAN_TOKEN in p]
    if not spanned:
        raise UserError(
            "dataset has no {SPAN} pattern for its train split: imported labels become a span "
            "(e.g. dataset.data_files: [data/span-{SPAN}/*.csv])"
        )
    if "://" in spanned[0]:
        raise UserError(f"{spanned[0]} is in a bucket: import writes local spans; copy the span there yourself")
    folder = Path(spans.span_dir(spanned[0], spans.span_name(span, dataset.span_digits)))
    inside = spanned[0].split(spans.SPAN_TOKEN, 1)[1].split("/", 1)
    if len(inside) == 1:  # the span names a file: data/reviews-{SPAN}.csv
        return folder, None
    for suffix in FORMATS:
        name = f"{FILE_STEM}{suffix}"
        if "/" not in inside[1] and fnmatch.fnmatch(name, inside[1]):
            marker = folder / dataset.ready_marker if dataset.ready_marker else None
            return folder / name, marker
    raise UserError(
        f"no labeled.csv/.jsonl/.parquet matches {spanned[0]}'s files: give a pattern like span-{{SPAN}}/*.csv"
    )


def _columns(config: PipelineConfig, rows: list[dict]) -> list[dict]:
    dataset = config.dataset
    named = {"text": dataset.text_column, "label": dataset.label_column}
    if dataset.text_pair_column:
        named[TEXT_PAIR_FEATURE] = dataset.text_pair_column
    return [{named[k]: v for k, v in row.items() if k in named} for row in rows]


def _write(path: Path, rows: list[dict]) -> None:
    import pandas as pd

    frame = pd.DataFrame(rows)
    if path.suffix == ".parquet":
        frame.to_parquet(path, index=False)
    elif path.suffix == ".jsonl":
        frame.to_json(path, orient="records", lines=True, force_ascii=False)
    else:
        frame.to_csv(path, index=False)


def import_labels(config: PipelineConfig, source: str | Path, span: int | None = None) -> tuple[int, Path, int, int]:
    """Writes the labeled rows of `source` as span `span` (default: one past the newest) and checks it as the
    ExampleGen would; returns (span, the file written, rows, tasks left without a label)."""
    from components.example_gen.dataset_pass import EVERY_ROW, dataset_pass

    rows, unlabeled = read_labeled(source)
    if not rows:
        raise UserError(f"{source} has no labeled texts ({unlabeled} tasks without a label): label some, export again")
    available = spans.available_spans(config.dataset)
    span = span or (max(available, default=0) + 1)
    if span in available:
        raise UserError(f"span {span} already has data: import into a new span (the next is {max(available) + 1})")
    path, marker = span_destination(config, span)
    if path.exists():
        raise UserError(f"{path} exists: a span's files are never overwritten")
    path.parent.mkdir(parents=True, exist_ok=True)
    _write(path, _columns(config, rows))
    try:
        if marker is not None:
            marker.write_text("")
        dataset_pass(config.dataset.model_copy(update={"span": span}), EVERY_ROW)  # as the span's run will read it
    except BaseException:
        for written in (marker, path):
            if written is not None:
                written.unlink(missing_ok=True)
        raise
    return span, path, len(rows), unlabeled
