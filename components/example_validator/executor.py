"""An ExampleValidator that stops the run when a split breaks the schema, saying what is wrong.

TFX's ExampleValidator records anomalies and lets the pipeline go on into training; here the anomalies
are still recorded (for the run report), then the execution fails so nothing downstream starts.
"""

from __future__ import annotations

import os

from tensorflow_metadata.proto.v0 import anomalies_pb2
from tfx.components.example_validator import executor as validator_executor
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import io_utils

from models.errors import UserError


class DataAnomaliesError(UserError, RuntimeError):
    """A split does not fit the schema; training on it would waste hours or learn the wrong thing."""


def describe_anomalies(by_split: dict[str, anomalies_pb2.Anomalies]) -> list[str]:
    problems = []
    for split, anomalies in sorted(by_split.items()):
        for feature, info in sorted(anomalies.anomaly_info.items()):
            reasons = "; ".join(f"{r.short_description}: {r.description}" for r in info.reason) or info.description
            problems.append(f"split '{split}', feature '{feature}': {reasons}")
        if anomalies.HasField("dataset_anomaly_info"):
            info = anomalies.dataset_anomaly_info
            reasons = "; ".join(f"{r.short_description}: {r.description}" for r in info.reason)
            problems.append(f"split '{split}' (whole dataset): {reasons}")
    return problems


def load_anomalies(uri: str, splits: list[str]) -> dict[str, anomalies_pb2.Anomalies]:
    """The anomalies an ExampleValidator wrote under `uri`, per split."""
    return {
        split: anomalies_pb2.Anomalies.FromString(
            io_utils.read_bytes_file(os.path.join(uri, f"Split-{split}", validator_executor.DEFAULT_FILE_NAME))
        )
        for split in splits
    }


class Executor(validator_executor.Executor):
    def Do(self, input_dict, output_dict, exec_properties) -> None:
        super().Do(input_dict, output_dict, exec_properties)
        anomalies_artifact = artifact_utils.get_single_instance(output_dict[standard_component_specs.ANOMALIES_KEY])
        splits = artifact_utils.decode_split_names(anomalies_artifact.split_names)
        problems = describe_anomalies(load_anomalies(anomalies_artifact.uri, splits))
        if problems:
            raise DataAnomaliesError(
                "the examples do not fit the schema, so training was not started:\n  - "
                + "\n  - ".join(problems)
                + "\nFix the data (or the dataset config), or review the schema if the change is intended."
            )
