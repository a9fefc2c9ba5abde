"""The Trainer component: TFX's Trainer plus `epochs` and `learning_rate` as their own parameters.

Separate parameters can be runtime parameters of a compiled pipeline (a user changes them per run on Vertex
without recompiling); the executor folds them into the custom_config that run_fn reads. `VertexHFTrainer`
runs the same executor inside a Vertex AI CustomJob through TFX's Vertex training extension.
"""

from __future__ import annotations

import json
from typing import Any

from tfx import types
from tfx.components.trainer import component as trainer_component
from tfx.components.trainer import executor as trainer_executor
from tfx.components.util import udf_utils
from tfx.dsl.components.base import base_component, executor_spec
from tfx.extensions.google_cloud_ai_platform.trainer import executor as vertex_trainer_executor
from tfx.proto import trainer_pb2
from tfx.types import component_spec, standard_artifacts, standard_component_specs
from tfx.utils import json_utils

from components.evaluator.same_task import record_exported_task
from components.run_parameters import EPOCHS, LEARNING_RATE
from components.vertex_clients import VERTEX_CLIENT_KEY, job_client_at
from models.hardware import distribution

TRAINING_PARAMETERS = (EPOCHS, LEARNING_RATE)  # the run parameters the Trainer takes as its own


class HFTrainerSpec(standard_component_specs.TrainerSpec):
    PARAMETERS = {  # noqa: RUF012
        **standard_component_specs.TrainerSpec.PARAMETERS,
        **{p.name: component_spec.ExecutionParameter(type=p.ptype, optional=True) for p in TRAINING_PARAMETERS},
    }


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


class HFTrainer(trainer_component.Trainer):
    """A generic Trainer (run_fn by module path) on transformed examples; outputs `model` and `model_run`."""

    SPEC_CLASS = HFTrainerSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)

    def __init__(
        self,
        *,
        examples,
        transform_graph,
        schema,
        run_fn: str,
        train_args: trainer_pb2.TrainArgs,
        eval_args: trainer_pb2.EvalArgs,
        custom_config: dict[str, Any],
        epochs=None,
        learning_rate=None,
        hyperparameters=None,
        base_model=None,
    ):
        # TFX's Trainer.__init__ builds a TrainerSpec; this one needs the two extra parameters.
        base_component.BaseComponent.__init__(
            self,
            spec=HFTrainerSpec(
                examples=examples,
                transform_graph=transform_graph,
                schema=schema,
                run_fn=run_fn,
                train_args=train_args,
                eval_args=eval_args,
                custom_config=json_utils.dumps(custom_config),
                hyperparameters=hyperparameters,  # the Tuner's best_hyperparameters, when a Tuner runs
                base_model=base_model,  # the blessed model a warm start begins from (training.warm_start)
                **{EPOCHS.name: epochs, LEARNING_RATE.name: learning_rate},
                model=types.Channel(type=standard_artifacts.Model),
                model_run=types.Channel(type=standard_artifacts.ModelRun),
            ),
        )


class VertexHFTrainer(HFTrainer):
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(VertexExecutor)
