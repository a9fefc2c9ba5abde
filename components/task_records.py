"""The task a model was trained for, recorded on its ML Metadata artifacts, so baselines are of the same task
only: models of other tasks in one pipeline root never meet in the Evaluator.

A binary model blessed earlier is no baseline for a 3-class one (TFMA's multi-class combiner crashes on the
pair, after training), nor is a model whose labels come in another order, or one reading sentence pairs. The
Trainer records the model's task contract (models/task.py) on the Model artifact; the Evaluator copies it onto
the ModelBlessing it writes; the resolver picks the latest blessed model whose blessing carries this run's
task key. With none, the run is the first of its task and is judged on the absolute thresholds alone.
"""

from __future__ import annotations

import json

from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import path_utils

from models.task import TASK_CONTRACT_PROPERTY, TASK_KEY_PROPERTY, TaskContract, read_contract

# The pipeline a model was trained by, recorded like the task: Vertex's ML Metadata store holds every
# pipeline of a project and region, and its compiled baseline query would otherwise see them all.
BASELINE_SCOPE_PROPERTY = "baseline_scope"


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
