"""What TFX executes for the BatchScorer: the scoring job (job.py) in the component's Beam pipeline, for a
blessed model only; the counts it writes on the `scored` artifact."""

from __future__ import annotations

import json
import os
import time

from tfx.components.util import model_utils
from tfx.dsl.components.base import base_beam_executor
from tfx.types import artifact_utils
from tfx.utils import path_utils

from components.scorer.config import ScoringConfig
from components.scorer.job import add_scoring, job_summary, plan_job
from components.scorer.records import BatchJob
from models.config_section import build_section

SCORED_FILE = "scored.jsonl"
ROWS_PROPERTY, BAD_ROWS_PROPERTY, LABEL_COUNTS_PROPERTY = "rows", "bad_rows", "label_counts"


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
