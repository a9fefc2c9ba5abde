"""What a scoring job is (BatchJob), what it decided before reading a row (ScoringPlan) and what it did
(BatchSummary): the records the row readers, the job and its callers share."""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

from models.serving.precision import ServingPrecision
from models.serving.prediction_log import LogSettings

# Rows per serving_default call. It runs a call's rows shortest first in chunks of 32, each as wide as its
# longest text: the more rows per call, the less padding. 1024 scored 1.15x the rows/s of 256 on MiniLM-L6.
DEFAULT_BATCH_SIZE = 1024


@dataclasses.dataclass(frozen=True)
class BatchJob:
    model: str  # serving/<name> (the newest version) or a version folder
    input: str  # a file, a glob, or a save_to_disk folder
    output: str  # .jsonl, .csv or .parquet: one file
    text_column: str = "text"
    text_pair_column: str = ""
    id_columns: tuple[str, ...] | None = None  # None: every input column but the texts
    batch_size: int = DEFAULT_BATCH_SIZE
    beam_args: tuple[str, ...] = ()
    progress_every: int = 10_000
    log: LogSettings | None = None  # `hftfx predict --log-dir`: the answers also go to a prediction log
    precision: ServingPrecision | None = None  # `hftfx predict --precision`: None computes in fp32

    @property
    def bad_rows_path(self) -> str:
        stem, _ = os.path.splitext(self.output)
        return f"{stem}.bad.jsonl"


@dataclasses.dataclass
class BatchSummary:
    rows: int
    bad_rows: int
    seconds: float
    label_counts: dict[str, int]
    output: str
    bad_rows_path: str
    logged: str = ""  # with a prediction log: how many rows went where

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0

    def render(self) -> str:
        total = sum(self.label_counts.values()) or 1
        labels = ", ".join(f"{name} {n:,} ({n / total:.1%})" for name, n in self.label_counts.items())
        return "\n".join(
            [
                f"scored        {self.rows:,} rows in {self.seconds:.1f} s ({self.rows_per_second:,.0f} rows/s)",
                f"labels        {labels or 'none'}",
                f"output        {self.output}",
                f"bad rows      {self.bad_rows:,}" + (f" written to {self.bad_rows_path}" if self.bad_rows else ""),
                *([f"logged        {self.logged}"] if self.logged else []),
            ]
        )


@dataclasses.dataclass(frozen=True)
class ScoringPlan:
    """What a job will do, decided before any row is read: the model, its task, the formats and columns."""

    model_dir: str
    contract: Any  # models.task.TaskContract
    input_kind: str
    columns: tuple[str, ...]  # the output's, in order
    scoring: Any  # components.scorer.scoring.ScoringColumns
    started: float = dataclasses.field(default_factory=time.time)  # the hour a prediction log files its rows under

    @property
    def version(self) -> str:
        """The pushed version scored with: its folder's name."""
        return self.model_dir.rstrip("/").rsplit("/", 1)[-1]

    @property
    def multi_label(self) -> bool:
        from models.task import MULTI_LABEL

        return self.contract.task == MULTI_LABEL
