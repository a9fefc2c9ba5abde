"""BatchScorer: the pipeline's step that scores unlabeled rows (`scoring.input`) with each blessed model.

The same job as `hftfx predict --input` (components/scorer/job.py), in the component's Beam pipeline, so with
the run's Beam runner (Dataflow in a cloud profile that names it); the model is the Trainer's SavedModel the
Evaluator blessed. An unblessed model scores nothing. The `scored` artifact holds scored.jsonl and, when rows
were set aside, scored.bad.jsonl; its properties count rows, bad rows and labels.
"""

from __future__ import annotations

import json

from tfx import types
from tfx.dsl.components.base import base_beam_component, executor_spec
from tfx.types import artifact, component_spec, standard_artifacts

from components.scorer.executor import Executor


class ScoredRows(artifact.Artifact):
    """Rows scored by a model: the id columns, the label(s), the score and a probability per label."""

    # A Kubeflow v2 schema title (TFX's compiler takes only <namespace>.<Name>) that TFX's entrypoint imports
    # the class from: components/__init__.py provides it.
    TYPE_NAME = "components.ScoredRows"


class BatchScorerSpec(types.ComponentSpec):
    PARAMETERS = {"scoring": component_spec.ExecutionParameter(type=str)}  # noqa: RUF012  (ScoringConfig, JSON)
    INPUTS = {  # noqa: RUF012
        "model": component_spec.ChannelParameter(type=standard_artifacts.Model),
        "model_blessing": component_spec.ChannelParameter(type=standard_artifacts.ModelBlessing),
    }
    OUTPUTS = {"scored": component_spec.ChannelParameter(type=ScoredRows)}  # noqa: RUF012


class BatchScorer(base_beam_component.BaseBeamComponent):
    """Scores `scoring.input` with the blessed model into a `scored` artifact."""

    SPEC_CLASS = BatchScorerSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)

    def __init__(self, *, model, model_blessing, scoring: dict):
        super().__init__(
            spec=BatchScorerSpec(
                model=model,
                model_blessing=model_blessing,
                scoring=json.dumps(scoring),
                scored=types.Channel(type=ScoredRows),
            )
        )
