"""The `evaluation` config section: the blessing's bounds and what the Evaluator slices by.

Apart from components/evaluator/module.py, which imports TFMA: the config is read before TensorFlow loads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import Field

from models.config_section import ConfigSection, flag, increasing_ints

Share = Annotated[float, Field(ge=0, le=1)]
BucketEdges = increasing_ints(1)


class EvaluationConfig(ConfigSection):
    """Blessing rules: absolute lower bounds and no regression against the latest blessed model."""

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
    length_buckets: BucketEdges = Field((16, 32), description="token-count bucket edges of the text-length slices")


def threshold_per_label(evaluation: EvaluationConfig, label_names: Sequence[str]) -> tuple[float, ...]:
    """evaluation.decision_thresholds in label id order, 0.5 where not given."""
    return tuple(float(evaluation.decision_thresholds.get(name, 0.5)) for name in label_names)
