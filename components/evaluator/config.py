"""The `evaluation` config section: the blessing's bounds and what the Evaluator slices by.

Apart from components/evaluator/module.py, which imports TFMA: the config is read before TensorFlow loads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import Field, model_validator

from models.config_section import ConfigSection, Texts, flag, increasing_ints
from models.names import MISSING_SLICE_VALUE, RESERVED_FEATURES

Share = Annotated[float, Field(ge=0, le=1)]
BucketEdges = increasing_ints(1)


class EvaluationConfig(ConfigSection):
    """Blessing rules: absolute lower bounds and no regression against the latest blessed model."""

    RENAMED = {"length_buckets": "evaluation.length_slice_edges"}  # noqa: RUF012  (training's batch widths shared it)

    min_accuracy: Share = Field(
        0.7, description="blessing needs at least this test accuracy", json_schema_extra=flag("--min-accuracy")
    )
    min_auc: Share = Field(
        0.75, description="blessing needs at least this test AUC", json_schema_extra=flag("--min-auc")
    )
    max_auc_regression: Share = Field(
        0.0,
        description="how much AUC a new model may lose against the blessed baseline and still be blessed, beyond "
        "the test split's noise: a loss whose 95% interval (paired, TFMA's jackknife) reaches this is blessed",
    )
    confidence_intervals: Literal["auto", "always", "never"] = Field(
        "auto",
        description="TFMA's 95% intervals of every metric and slice: auto: when a blessed baseline takes part (the "
        "comparison with it needs them); always: every run (about 7 s more per slice on 2 cores); never: the "
        "comparison takes point values (a retrain of equal quality is then refused about half the time)",
    )
    min_macro_f1: Share | None = Field(
        None,
        description="blessing also needs this macro F1 (the unweighted mean of each class's F1); null: reported, "
        "not gated",
    )
    decision_thresholds: dict[str, Annotated[float, Field(gt=0, lt=1)]] = Field(
        default_factory=dict,
        description="multi-label: a label is predicted when its probability reaches its threshold here (default "
        "0.5); serving and the per-label precision / recall / F1 use the same values",
    )
    length_slice_edges: BucketEdges = Field(
        (16, 32),
        description="token-count edges of the text-length slices the Evaluator reports (16, 32: 0-16, 17-32, 33+)",
    )
    slice_columns: Texts = Field(
        (),
        description="columns of the data (strings, integers, booleans; a missing value is its own slice, "
        f"'{MISSING_SLICE_VALUE}') the examples carry and the Evaluator slices by, e.g. [language, source]; each "
        "slice's AUC change against the blessed baseline is gated as the whole test split's is",
    )
    slice_crosses: tuple[tuple[str, ...], ...] = Field(
        (),
        description="crosses of slice_columns sliced and gated too, e.g. [[language, source]]: one slice per pair "
        "of values",
    )
    min_slice_examples: int = Field(
        100,
        ge=1,
        description="a slice with fewer test examples is reported and not gated: its paired interval rests on too "
        "few examples (TFMA's jackknife splits them 20 ways)",
    )
    slice_thresholds: dict[str, Share | None] = Field(
        default_factory=dict,
        description="per slice column (or cross, 'language,source'): the AUC its slices may lose against the "
        "blessed baseline beyond their noise (default max_auc_regression); null: reported, not gated",
    )

    @model_validator(mode="after")
    def _slices_named_once(self) -> EvaluationConfig:
        columns = set(self.slice_columns)
        if len(columns) != len(self.slice_columns):
            raise ValueError(f"evaluation.slice_columns names a column twice: {list(self.slice_columns)}")
        reserved = sorted(columns & set(RESERVED_FEATURES))
        if reserved:
            raise ValueError(
                f"evaluation.slice_columns {reserved}: the examples already carry features of that name; rename the "
                "column in the data"
            )
        for cross in self.slice_crosses:
            if len(cross) < 2 or not set(cross) <= columns:
                raise ValueError(
                    f"evaluation.slice_crosses {list(cross)} crosses two or more of evaluation.slice_columns "
                    f"{list(self.slice_columns)}: add its columns there"
                )
        known = columns | {cross_name(cross) for cross in self.slice_crosses}
        unknown = sorted(set(self.slice_thresholds) - known)
        if unknown:
            raise ValueError(
                f"evaluation.slice_thresholds names {unknown}, which is not a slice column or cross; use one of "
                f"{sorted(known)}"
            )
        return self

    def gated_slices(self) -> dict[tuple[str, ...], float]:
        """The user's slice columns and crosses whose slices are gated, with the AUC each may lose."""
        specs = [(column,) for column in self.slice_columns] + [tuple(cross) for cross in self.slice_crosses]
        allowed = {spec: self.slice_thresholds.get(cross_name(spec), self.max_auc_regression) for spec in specs}
        return {spec: loss for spec, loss in allowed.items() if loss is not None}


def cross_name(columns: Sequence[str]) -> str:
    """A slice column or cross as slice_thresholds names it: 'language' or 'language,source'."""
    return ",".join(columns)


def threshold_per_label(evaluation: EvaluationConfig, label_names: Sequence[str]) -> tuple[float, ...]:
    """evaluation.decision_thresholds in label id order, 0.5 where not given."""
    return tuple(float(evaluation.decision_thresholds.get(name, 0.5)) for name in label_names)
