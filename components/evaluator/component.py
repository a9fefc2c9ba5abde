"""The Evaluator the DAG builds, and the baseline resolver's strategy: baselines of the same task only."""

from __future__ import annotations

from tfx.components.evaluator import component as evaluator_component
from tfx.dsl.components.base import executor_spec
from tfx.dsl.input_resolution.strategies.latest_blessed_model_strategy import LatestBlessedModelStrategy

from components.evaluator.executor import Executor
from components.task_records import task_key_of


class SameTaskLatestBlessedModelStrategy(LatestBlessedModelStrategy):
    """TFX's latest-blessed-model resolution over the blessings of one task (config `task_key`).

    Blessings written before task contracts existed carry no key: they are never a baseline (comparing against
    a model of unknown task is how the crash this prevents happened).
    """

    def __init__(self, task_key: str):
        self._task_key = task_key

    def _resolve(self, input_dict, model_channel_key: str, model_blessing_channel_key: str):
        same_task = [a for a in input_dict[model_blessing_channel_key] if task_key_of(a) == self._task_key]
        return super()._resolve(
            {**input_dict, model_blessing_channel_key: same_task}, model_channel_key, model_blessing_channel_key
        )


class TaskEvaluator(evaluator_component.Evaluator):
    """TFX's Evaluator whose blessing records the task it blessed for."""

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)
