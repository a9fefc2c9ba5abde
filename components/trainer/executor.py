"""What TFX executes for the Trainer: TFX's generic executor with the epochs / learning_rate parameters folded
into the custom_config run_fn reads, and the launcher that runs it in a Vertex AI CustomJob."""

from __future__ import annotations

import json
from typing import Any

from tfx.components.trainer import executor as trainer_executor
from tfx.components.util import udf_utils
from tfx.extensions.google_cloud_ai_platform.trainer import executor as vertex_trainer_executor
from tfx.types import standard_component_specs

from components.run_parameters import EPOCHS, LEARNING_RATE
from components.task_records import record_exported_task
from components.vertex_clients import VERTEX_CLIENT_KEY, job_client_at
from models.hardware import distribution

TRAINING_PARAMETERS = (EPOCHS, LEARNING_RATE)  # the run parameters the Trainer takes as its own


def with_overrides(exec_properties: dict[str, Any]) -> dict[str, Any]:
    """exec_properties whose custom_config carries the epochs / learning_rate parameters, where given."""
    key = standard_component_specs.CUSTOM_CONFIG_KEY
    custom_config = json.loads(exec_properties.get(key) or "{}")
    for parameter in TRAINING_PARAMETERS:
        if exec_properties.get(parameter.name) is not None:
            section, field = parameter.section_field
            custom_config.setdefault(section, {})[field] = exec_properties[parameter.name]
    return {**exec_properties, key: json.dumps(custom_config)}


class Executor(trainer_executor.GenericExecutor):
    def Do(self, input_dict, output_dict, exec_properties) -> None:
        role = distribution.cluster_role()
        if role is not None and not role.is_chief:
            # A worker of a multi-worker CustomJob trains in lock-step with the chief, which alone writes the
            # outputs. TFX's Do would fail it: after run_fn it checks for the export only the chief makes.
            properties = with_overrides(exec_properties)
            udf_utils.get_fn(properties, "run_fn")(self._GetFnArgs(input_dict, output_dict, properties))
            return
        super().Do(input_dict, output_dict, with_overrides(exec_properties))
        record_exported_task(output_dict, exec_properties)


class VertexExecutor(vertex_trainer_executor.GenericExecutor):
    """Starts a Vertex AI CustomJob that runs `Executor` (overrides included) on the chosen machine."""

    def _GetExecutorClass(self):
        return Executor

    def Do(self, input_dict, output_dict, exec_properties) -> None:
        custom_config = json.loads(exec_properties.get(standard_component_specs.CUSTOM_CONFIG_KEY) or "{}")
        with job_client_at(custom_config.get(VERTEX_CLIENT_KEY)):
            super().Do(input_dict, output_dict, exec_properties)
        # The CustomJob wrote the export; the launcher records its task.
        record_exported_task(output_dict, exec_properties)
