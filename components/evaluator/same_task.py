"""Baselines of the same task only: models of other tasks in one pipeline root never meet in the Evaluator.

A binary model blessed earlier is no baseline for a 3-class one (TFMA's multi-class combiner crashes on the
pair, after training), nor is a model whose labels come in another order, or one reading sentence pairs. The
Trainer records the model's task contract (models/task.py) on the Model artifact; the Evaluator copies it onto
the ModelBlessing it writes; the resolver picks the latest blessed model whose blessing carries this run's
task key. With none, the run is the first of its task and is judged on the absolute thresholds alone.
"""

from __future__ import annotations

import json
import os

from absl import logging
from tfx.components.evaluator import component as evaluator_component
from tfx.components.evaluator import constants
from tfx.components.evaluator import executor as evaluator_executor
from tfx.dsl.components.base import executor_spec
from tfx.dsl.input_resolution.strategies.latest_blessed_model_strategy import LatestBlessedModelStrategy
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import io_utils, path_utils

from components.evaluator.noise_aware_gate import gate_with_noise, with_intervals_where_compared
from models.task import TASK_CONTRACT_PROPERTY, TASK_KEY_PROPERTY, TaskContract, read_contract

# The pipeline a model was trained by, recorded like the task: Vertex's ML Metadata store holds every
# pipeline of a project and region, and its compiled baseline query would otherwise see them all.
BASELINE_SCOPE_PROPERTY = "baseline_scope"
_BLESSED = "blessed"
_CURRENT_MODEL_ID = "current_model_id"


def record_task(model_artifact, contract: TaskContract) -> None:
    model_artifact.set_string_custom_property(TASK_KEY_PROPERTY, contract.key)
    model_artifact.set_string_custom_property(TASK_CONTRACT_PROPERTY, contract.to_json())


def record_exported_task(output_dict, exec_properties) -> TaskContract:
    """After training: the contract the export carries, and the pipeline's scope from the Trainer's
    custom_config, recorded on the Model artifact."""
    model = artifact_utils.get_single_instance(output_dict[standard_component_specs.MODEL_KEY])
    contract = read_contract(path_utils.serving_model_dir(model.uri))
    if contract is None:
        raise RuntimeError(f"the export under {model.uri} carries no task contract; run_fn must write it")
    record_task(model, contract)
    custom_config = json.loads(exec_properties.get(standard_component_specs.CUSTOM_CONFIG_KEY) or "{}")
    model.set_string_custom_property(BASELINE_SCOPE_PROPERTY, custom_config.get(BASELINE_SCOPE_PROPERTY, ""))
    return contract


def task_key_of(artifact) -> str | None:
    value = artifact.get_string_custom_property(TASK_KEY_PROPERTY)
    return value or None


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


def set_blessed(blessing, blessed: bool) -> None:
    """The blessing's verdict as TFX writes it: the BLESSED or NOT_BLESSED file, and the `blessed` property."""
    for name in (constants.BLESSED_FILE_NAME, constants.NOT_BLESSED_FILE_NAME):
        path = os.path.join(blessing.uri, name)
        if fileio.exists(path):
            fileio.remove(path)
    name = constants.BLESSED_FILE_NAME if blessed else constants.NOT_BLESSED_FILE_NAME
    io_utils.write_string_file(os.path.join(blessing.uri, name), "")
    value = constants.BLESSED_VALUE if blessed else constants.NOT_BLESSED_VALUE
    blessing.set_int_custom_property(constants.ARTIFACT_PROPERTY_BLESSED_KEY, value)


class Executor(evaluator_executor.Executor):
    """TFX's Evaluator, whose blessing carries the candidate's task contract and whose comparison with the
    baseline knows the test split's noise (components/evaluator/noise_aware_gate.py). A baseline of another task is
    dropped (the resolver already excludes it; this keeps a hand-wired pipeline from crashing TFMA)."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:
        candidate = artifact_utils.get_single_instance(input_dict[standard_component_specs.MODEL_KEY])
        key = task_key_of(candidate)
        baselines = input_dict.get(standard_component_specs.BASELINE_MODEL_KEY) or []
        if baselines and task_key_of(baselines[0]) != key:
            logging.warning("baseline model %s is of another task: evaluating without it", baselines[0].uri)
            input_dict = {k: v for k, v in input_dict.items() if k != standard_component_specs.BASELINE_MODEL_KEY}
            baselines = []
        config_key = standard_component_specs.EVAL_CONFIG_KEY
        if exec_properties.get(config_key):
            config = with_intervals_where_compared(exec_properties[config_key], has_baseline=bool(baselines))
            exec_properties = {**exec_properties, config_key: config}
        super().Do(input_dict, output_dict, exec_properties)
        blessing = artifact_utils.get_single_instance(output_dict[standard_component_specs.BLESSING_KEY])
        verdict = gate_with_noise(artifact_utils.get_single_uri(output_dict[standard_component_specs.EVALUATION_KEY]))
        if verdict is not None:
            set_blessed(blessing, verdict)
        blessing.set_string_custom_property(TASK_KEY_PROPERTY, key or "")
        for name in (TASK_CONTRACT_PROPERTY, BASELINE_SCOPE_PROPERTY):
            blessing.set_string_custom_property(name, candidate.get_string_custom_property(name))


class TaskEvaluator(evaluator_component.Evaluator):
    """TFX's Evaluator whose blessing records the task it blessed for."""

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)
