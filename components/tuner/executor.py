"""The Vertex Tuner's launcher: TFX's, with its job client pointed at the profile's API host."""

from __future__ import annotations

import json

from tfx.extensions.google_cloud_ai_platform.tuner import executor as vertex_tuner_executor
from tfx.types import standard_component_specs

from components.vertex_clients import VERTEX_CLIENT_KEY, job_client_at


class VertexTunerExecutor(vertex_tuner_executor.Executor):
    def Do(self, input_dict, output_dict, exec_properties) -> None:
        custom_config = json.loads(exec_properties.get(standard_component_specs.CUSTOM_CONFIG_KEY) or "{}")
        with job_client_at(custom_config.get(VERTEX_CLIENT_KEY)):
            super().Do(input_dict, output_dict, exec_properties)
