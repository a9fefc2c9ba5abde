"""The Tuner component: TFX's own, locally and in a Kubeflow pod; on Vertex AI, TFX's Vertex Tuner extension,
whose launcher starts one CustomJob with a worker per parallel trial (KerasTuner's chief oracle on the first).
The launcher here only points TFX's job client at the profile's API host, as the Vertex Trainer's does."""

from __future__ import annotations

import json

from tfx.dsl.components.base import executor_spec
from tfx.extensions.google_cloud_ai_platform.tuner import component as vertex_tuner_component
from tfx.extensions.google_cloud_ai_platform.tuner import executor as vertex_tuner_executor
from tfx.types import standard_component_specs

from components.vertex_clients import VERTEX_CLIENT_KEY, job_client_at

TUNER_FN = "components.tuner.module.tuner_fn"


class VertexTunerExecutor(vertex_tuner_executor.Executor):
    def Do(self, input_dict, output_dict, exec_properties) -> None:
        custom_config = json.loads(exec_properties.get(standard_component_specs.CUSTOM_CONFIG_KEY) or "{}")
        with job_client_at(custom_config.get(VERTEX_CLIENT_KEY)):
            super().Do(input_dict, output_dict, exec_properties)


class VertexHFTuner(vertex_tuner_component.Tuner):
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(VertexTunerExecutor)
