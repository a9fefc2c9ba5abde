"""Scoring rows of text with a pushed SavedModel in Beam, through RunInference: the same transforms run on the
local runner and on Dataflow.

Rows are dicts (a JSON line, a CSV record, a parquet row). `CheckRows` sends rows without a usable text aside
with the reason; `TextClassifierHandler` is RunInference's model handler: it loads the SavedModel once per
worker and calls serving_default on large batches, which sorts each batch by token count and runs it in
chunks only as wide as their longest text (models/serving/signatures.py), so large batches carry little padding.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any

import apache_beam as beam
from apache_beam.ml.inference.base import ModelHandler, PredictionResult, RunInference

from models.names import PROBABILITIES, TEXT_FEATURE
from models.serving.precision import ServingPrecision


class _WithoutMemoryProbeWarning(logging.Filter):
    """Beam 2.77's RunInference finds `resource` only when torch imports (ml/inference/base.py imports both in
    one try); without torch it warns on every run that it cannot read memory. Nothing here depends on it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Resource module is not available")


if not any(isinstance(f, _WithoutMemoryProbeWarning) for f in logging.getLogger().filters):
    logging.getLogger().addFilter(_WithoutMemoryProbeWarning())

BAD = "bad"  # CheckRows' tagged output: {"row": ..., "reason": ...}
LOGGED = "logged"  # ScoreRows' prediction-log lines, when the job logs
METRICS_NAMESPACE = "hftfx_batch_prediction"
LABEL_COUNTER_PREFIX = "label:"  # one Beam counter per predicted label: the summary's label distribution
LOGGED_COUNTER = "logged_rows"


@dataclasses.dataclass(frozen=True)
class ScoringColumns:
    """Which input columns hold the texts, and which pass through to the output (ids)."""

    text: str = TEXT_FEATURE
    text_pair: str = ""  # set for sentence-pair models
    ids: tuple[str, ...] = ()


def _problem(row: Any, columns: ScoringColumns) -> str | None:
    if not isinstance(row, dict):
        return f"not a row of named columns ({type(row).__name__})"
    for role, column in (("text", columns.text), ("text pair", columns.text_pair)):
        if not column:
            continue
        if column not in row:
            return f"no '{column}' column ({role})"
        value = row[column]
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return f"'{column}' is missing ({role})"
        if not isinstance(value, str):
            return f"'{column}' is a {type(value).__name__}, not text ({role})"
    return None


class CheckRows(beam.DoFn):
    """Rows with their texts in place go on; the others go to the BAD output with the reason."""

    def __init__(self, columns: ScoringColumns):
        self._columns = columns
        self._bad = beam.metrics.Metrics.counter(METRICS_NAMESPACE, "bad_rows")

    def process(self, row):
        problem = _problem(row, self._columns)
        if problem is None:
            yield row
        else:
            self._bad.inc()
            yield beam.pvalue.TaggedOutput(BAD, {"reason": problem, "row": json_safe(row)})


def json_safe(value: Any) -> Any:
    """A row as JSON can hold it (bytes, NaN, dates become strings or null), for the bad-rows file."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return None
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


class TextClassifierHandler(ModelHandler[dict, PredictionResult, Any]):
    """RunInference's handler for the pushed text classifier: rows in, serving_default's outputs per row out."""

    def __init__(
        self, model_dir: str, columns: ScoringColumns, batch_size: int, precision: ServingPrecision | None = None
    ):
        super().__init__()
        self._model_dir = model_dir
        self._precision = precision
        self._columns = columns
        self._batch_size = batch_size

    def load_model(self):
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (the tokenizer's ops, registered before loading)

        from models.serving.pushed_model import at_precision

        model = tf.saved_model.load(self._model_dir)
        if self._precision is not None:
            chosen = at_precision(model, self._precision)
            if chosen.precision != self._precision.precision:
                print(f"[predict] scoring in {chosen.describe()}", file=sys.stderr, flush=True)
        return model

    def run_inference(self, batch: Sequence[dict], model, inference_args=None) -> Iterable[PredictionResult]:
        from models.serving.pushed_model import (
            predict_texts,  # serving_default's answer per row, as `hftfx predict` reads it
        )

        texts = [row[self._columns.text] for row in batch]
        pairs = [row[self._columns.text_pair] for row in batch] if self._columns.text_pair else None
        return [
            PredictionResult(
                row, {"labels": p.labels if p.labels is not None else (p.label,), PROBABILITIES: p.probabilities}
            )
            for row, p in zip(batch, predict_texts(model, texts, pairs), strict=True)
        ]

    def batch_elements_kwargs(self) -> dict[str, int]:
        return {"min_batch_size": self._batch_size, "max_batch_size": self._batch_size}

    def get_metrics_namespace(self) -> str:
        return METRICS_NAMESPACE


class ToOutputRow(beam.DoFn):
    """The output row: the id columns as read, then the answer (label(s), score, a probability per label)."""

    def __init__(self, ids: Sequence[str], label_names: Sequence[str], multi_label: bool):
        self._ids, self._label_names, self._multi_label = tuple(ids), tuple(label_names), multi_label

    def setup(self):
        self._counters = {
            name: beam.metrics.Metrics.counter(METRICS_NAMESPACE, LABEL_COUNTER_PREFIX + name)
            for name in self._label_names
        }

    def process(self, result: PredictionResult):
        row, answer = result.example, result.inference
        out = {column: row.get(column) for column in self._ids}
        chosen, probabilities = answer["labels"], answer[PROBABILITIES]
        out.update(output_answer(chosen, probabilities, self._label_names, self._multi_label))
        for name in chosen:
            self._counters[name].inc()
        yield out


class ToLogLine(beam.DoFn):
    """A sampled share of the answers as prediction-log rows (models/serving/prediction_log.py), so
    `hftfx monitor` reads a batch job's traffic as it reads a server's."""

    def __init__(self, columns: ScoringColumns, label_names: Sequence[str], multi_label: bool, log, version, at):
        self._columns, self._label_names, self._multi_label = columns, tuple(label_names), multi_label
        self._log, self._version, self._at = log, version, at

    def setup(self):
        import random

        self._random = random.Random()
        self._logged = beam.metrics.Metrics.counter(METRICS_NAMESPACE, LOGGED_COUNTER)

    def process(self, result: PredictionResult):
        from models.names import TEXT_PAIR_FEATURE
        from models.serving.prediction_log import log_rows

        if self._random.random() >= self._log.sample:
            return
        row, answer = result.example, result.inference
        texts = {TEXT_FEATURE: [row[self._columns.text]]}
        if self._columns.text_pair:
            texts[TEXT_PAIR_FEATURE] = [row[self._columns.text_pair]]
        probabilities = [float(p) for p in answer[PROBABILITIES]]
        if self._multi_label:
            prediction = {PROBABILITIES: probabilities, "labels": list(answer["labels"])}
        else:
            label = answer["labels"][0]
            prediction = {
                PROBABILITIES: probabilities,
                "label": label,
                "label_id": self._label_names.index(label),
                "confidence": max(probabilities),
            }
        (logged,) = log_rows(texts, [prediction], self._version, "batch", self._log.texts, self._at)
        self._logged.inc()
        yield json.dumps(logged, ensure_ascii=False)


def output_columns(label_names: Sequence[str], multi_label: bool) -> list[str]:
    return ["labels" if multi_label else "label", "score", *(f"p_{name}" for name in label_names)]


def output_answer(chosen: Sequence[str], probabilities: Sequence[float], label_names, multi_label: bool) -> dict:
    first, score_column, *probability_columns = output_columns(label_names, multi_label)
    return {
        first: ";".join(chosen) if multi_label else chosen[0],
        score_column: float(max(probabilities)),
        **{column: float(p) for column, p in zip(probability_columns, probabilities, strict=True)},
    }


class Progress(beam.DoFn):
    """Prints rows scored and rows/s every `every` rows (per worker), so a long job shows it is moving."""

    def __init__(self, every: int, stream=None):
        self._every = every
        self._stream = stream

    def setup(self):
        self._seen, self._started = 0, time.monotonic()

    def process(self, element):
        self._seen += 1
        if self._seen % self._every == 0:
            seconds = time.monotonic() - self._started
            print(
                f"[predict] {self._seen:,} rows scored, {self._seen / seconds:,.0f} rows/s",
                file=self._stream or sys.stderr,
                flush=True,
            )
        yield element


@beam.ptransform_fn
def ScoreRows(
    rows,
    model_dir: str,
    columns: ScoringColumns,
    label_names: Sequence[str],
    multi_label: bool,
    batch_size: int,
    progress_every: int = 10_000,
    log_line: ToLogLine | None = None,
    precision: ServingPrecision | None = None,
):
    """rows -> {"scored": output rows, BAD: rows set aside with their reason}, and with `log_line`,
    LOGGED: the sampled prediction-log lines."""
    checked = rows | "CheckRows" >> beam.ParDo(CheckRows(columns)).with_outputs(BAD, main="good")
    inferred = checked.good | "RunInference" >> RunInference(
        TextClassifierHandler(model_dir, columns, batch_size, precision)
    )
    scored = (
        inferred
        | "ToOutputRow" >> beam.ParDo(ToOutputRow(columns.ids, label_names, multi_label))
        | "Progress" >> beam.ParDo(Progress(progress_every))
    )
    outputs = {"scored": scored, BAD: checked[BAD]}
    if log_line is not None:
        outputs[LOGGED] = inferred | "ToLogLine" >> beam.ParDo(log_line)
    return outputs


def to_json_line(row: dict) -> str:
    return json.dumps(json_safe(row), ensure_ascii=False)
