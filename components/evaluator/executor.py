"""TFX's Evaluator executor whose blessing carries the candidate's task contract (components/task_records.py) and
whose comparison with the baseline knows the test split's noise (noise_aware_gate.py)."""

from __future__ import annotations

import os

from absl import logging
from tfx.components.evaluator import constants
from tfx.components.evaluator import executor as evaluator_executor
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import io_utils

from components.evaluator.noise_aware_gate import gate_with_noise, with_intervals_where_compared
from components.task_records import BASELINE_SCOPE_PROPERTY, task_key_of
from models.task import TASK_CONTRACT_PROPERTY, TASK_KEY_PROPERTY


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
