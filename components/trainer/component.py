"""The Trainer component: TFX's Trainer plus `epochs` and `learning_rate` as their own parameters.

Separate parameters can be runtime parameters of a compiled pipeline (a user changes them per run on Vertex
without recompiling); the executor folds them into the custom_config that run_fn reads. `VertexHFTrainer`
runs the same executor inside a Vertex AI CustomJob through TFX's Vertex training extension.
"""

from __future__ import annotations

from typing import Any

from tfx import types
from tfx.components.trainer import component as trainer_component
from tfx.dsl.components.base import base_component, executor_spec
from tfx.proto import trainer_pb2
from tfx.types import component_spec, standard_artifacts, standard_component_specs
from tfx.utils import json_utils

from components.run_parameters import EPOCHS, LEARNING_RATE
from components.trainer.executor import TRAINING_PARAMETERS, Executor, VertexExecutor


class HFTrainerSpec(standard_component_specs.TrainerSpec):
    PARAMETERS = {  # noqa: RUF012
        **standard_component_specs.TrainerSpec.PARAMETERS,
        **{p.name: component_spec.ExecutionParameter(type=p.ptype, optional=True) for p in TRAINING_PARAMETERS},
    }


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
