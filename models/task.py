"""What a model promises its clients: the task, the label set in id order, and the texts it reads.

Two models are interchangeable (one can be the other's baseline, or replace it under one serving name) only
when their contracts are equal. The contract is known before any component runs (from the config and the
probed label set), travels with the model (an ML Metadata property of the Model and its ModelBlessing, and a
file beside the SavedModel's warm-up requests), and is compared by its key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Sequence

SINGLE_LABEL, MULTI_LABEL = "single_label", "multi_label"
TASKS = (SINGLE_LABEL, MULTI_LABEL)
# ML Metadata custom properties of the Model (the Trainer writes them) and the ModelBlessing (the Evaluator
# copies them from the model it judged): the baseline resolver matches blessings on TASK_KEY_PROPERTY.
TASK_KEY_PROPERTY = "task_key"
TASK_CONTRACT_PROPERTY = "task_contract"
# Beside TF Serving's warm-up file, which the model server ignores as it ignores every other file there.
CONTRACT_FILE = os.path.join("assets.extra", "task_contract.json")


@dataclasses.dataclass(frozen=True)
class TaskContract:
    task: str  # single_label | multi_label
    label_names: tuple[str, ...]
    text_inputs: tuple[str, ...]  # serving_default's inputs: ("text",) or ("text", "text_pair")

    def to_json(self) -> str:
        return json.dumps(
            {"task": self.task, "label_names": list(self.label_names), "text_inputs": list(self.text_inputs)},
            sort_keys=True,
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, text: str) -> TaskContract:
        value = json.loads(text)
        return cls(value["task"], tuple(value["label_names"]), tuple(value["text_inputs"]))

    @property
    def key(self) -> str:
        """A short stable id of the contract: what ML Metadata queries (and Vertex's filters) match on."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]

    def describe(self) -> str:
        inputs = " + ".join(self.text_inputs)
        return f"{self.task.replace('_', '-')} over {inputs}, labels {list(self.label_names)}"

    def differences(self, other: TaskContract) -> list[str]:
        """What differs from `other`, in words a person can act on (empty when the contracts are equal)."""
        found = []
        if self.task != other.task:
            found.append(f"task {other.task} -> {self.task}")
        if self.text_inputs != other.text_inputs:
            found.append(f"inputs {list(other.text_inputs)} -> {list(self.text_inputs)}")
        if self.label_names != other.label_names:
            same_set = sorted(self.label_names) == sorted(other.label_names)
            what = "label order" if same_set else "label set"
            found.append(f"{what} {list(other.label_names)} -> {list(self.label_names)}")
        return found


def task_contract(label_names: Sequence[str], text_inputs: Sequence[str], multi_label: bool = False) -> TaskContract:
    return TaskContract(MULTI_LABEL if multi_label else SINGLE_LABEL, tuple(label_names), tuple(text_inputs))


def write_contract(export_dir: str, contract: TaskContract) -> str:
    import tensorflow as tf

    path = os.path.join(export_dir, CONTRACT_FILE)
    tf.io.gfile.makedirs(os.path.dirname(path))
    with tf.io.gfile.GFile(path, "w") as handle:
        handle.write(contract.to_json() + "\n")
    return path


def read_contract(export_dir: str) -> TaskContract | None:
    """The contract an export carries; None for exports made before contracts were written."""
    import tensorflow as tf

    path = os.path.join(export_dir, CONTRACT_FILE)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as handle:
        return TaskContract.from_json(handle.read())


def exported_shape(export_dir: str) -> tuple[tuple[str, ...], int | None]:
    """(serving_default's text inputs, label count) read from saved_model.pb alone: what an export made before
    contracts were written still tells about its clients' contract."""
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2

    with tf.io.gfile.GFile(os.path.join(export_dir, "saved_model.pb"), "rb") as handle:
        saved_model = saved_model_pb2.SavedModel.FromString(handle.read())
    signature = saved_model.meta_graphs[0].signature_def["serving_default"]
    dims = signature.outputs["probabilities"].tensor_shape.dim if "probabilities" in signature.outputs else []
    width = dims[-1].size if len(dims) == 2 and dims[-1].size > 0 else None
    return tuple(sorted(signature.inputs)), width
