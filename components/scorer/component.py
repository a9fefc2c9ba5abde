"""BatchScorer: the pipeline's step that scores unlabeled rows (`scoring.input`) with each blessed model.

The same job as `hftfx predict --input` (components/scorer/job.py), in the component's Beam pipeline, so with
the run's Beam runner (Dataflow in a cloud profile that names it); the model is the Trainer's SavedModel the
Evaluator blessed. An unblessed model scores nothing. The `scored` artifact holds scored.jsonl and, when rows
were set aside, scored.bad.jsonl; its properties count rows, bad rows and labels.
"""

from __future__ import annotations

import json
import os
import time

from tfx import types
from tfx.components.util import model_utils
from tfx.dsl.components.base import base_beam_component, base_beam_executor, executor_spec
from tfx.types import artifact, artifact_utils, component_spec, standard_artifacts
from tfx.utils import path_utils

from components.scorer.config import ScoringConfig
from components.scorer.job import BatchJob, add_scoring, job_summary, plan_job
from models.config_section import build_section

SCORED_FILE = "scored.jsonl"
ROWS_PROPERTY, BAD_ROWS_PROPERTY, LABEL_COUNTS_PROPERTY = "rows", "bad_rows", "label_counts"


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


class Executor(base_beam_executor.BaseBeamExecutor):
    def Do(self, input_dict, output_dict, exec_properties) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        scored = artifact_utils.get_single_instance(output_dict["scored"])
        if not model_utils.is_model_blessed(artifact_utils.get_single_instance(input_dict["model_blessing"])):
            scored.set_int_custom_property(ROWS_PROPERTY, 0)
            print("[BatchScorer] the model is not blessed: nothing scored", flush=True)
            return
        settings = build_section(ScoringConfig, json.loads(exec_properties["scoring"]), "scoring")
        model_uri = artifact_utils.get_single_uri(input_dict["model"])
        job = BatchJob(
            model=path_utils.serving_model_path(model_uri),
            input=settings.input,
            output=os.path.join(scored.uri, SCORED_FILE),
            text_column=settings.text_column,
            text_pair_column=settings.text_pair_column,
            id_columns=tuple(settings.id_columns) or None,
            batch_size=settings.batch_size,
        )
        plan = plan_job(job)
        started = time.monotonic()
        with self._make_beam_pipeline() as pipeline:
            add_scoring(pipeline, job, plan)
        summary = job_summary(pipeline.result, job, plan, time.monotonic() - started)
        scored.set_int_custom_property(ROWS_PROPERTY, summary.rows)
        scored.set_int_custom_property(BAD_ROWS_PROPERTY, summary.bad_rows)
        scored.set_string_custom_property(LABEL_COUNTS_PROPERTY, json.dumps(summary.label_counts))
        print(f"[BatchScorer] {settings.input}:\n{summary.render()}", flush=True)


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
