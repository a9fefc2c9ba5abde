"""A Pusher whose TF Serving versions appear whole or not at all.

TFX's filesystem Pusher copies straight into `<base>/<version>/`, writing saved_model.pb last; a crash
midway leaves a numbered folder with part of a model in it. Here the copy goes to a hidden staging folder
(TF Serving ignores names that are not numbers) and is renamed into place, which is atomic on a local
filesystem. Unblessed models are never pushed: that check stays TFX's own.
"""

from __future__ import annotations

import os
import shutil
import time

from absl import logging
from tfx.components.pusher import component as pusher_component
from tfx.components.pusher import executor as pusher_executor
from tfx.dsl.components.base import executor_spec
from tfx.proto import pusher_pb2
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import io_utils, proto_utils

STAGING_PREFIX = ".staging-"


def next_version(base_directory: str, now: float | None = None) -> str:
    """A Unix-seconds version that is newer than every version already there."""
    existing = [int(n) for n in os.listdir(base_directory) if n.isdigit()] if os.path.isdir(base_directory) else []
    return str(max(int(now if now is not None else time.time()), max(existing, default=0) + 1))


def clear_stale_staging(base_directory: str) -> None:
    for name in os.listdir(base_directory):
        if name.startswith(STAGING_PREFIX):
            logging.warning("removing a partial push left by an interrupted run: %s", name)
            shutil.rmtree(os.path.join(base_directory, name), ignore_errors=True)


def push_atomically(model_path: str, base_directory: str) -> tuple[str, str]:
    """Copies the model into base_directory/<version> through a staging folder; returns (path, version)."""
    os.makedirs(base_directory, exist_ok=True)
    clear_stale_staging(base_directory)
    version = next_version(base_directory)
    staging = os.path.join(base_directory, f"{STAGING_PREFIX}{version}")
    io_utils.copy_dir(model_path, staging)
    destination = os.path.join(base_directory, version)
    os.rename(staging, destination)
    return destination, version


class Executor(pusher_executor.Executor):
    def Do(self, input_dict, output_dict, exec_properties) -> None:
        push_destination = pusher_pb2.PushDestination()
        proto_utils.json_to_proto(exec_properties[standard_component_specs.PUSH_DESTINATION_KEY], push_destination)
        base = push_destination.filesystem.base_directory
        if push_destination.WhichOneof("destination") != "filesystem" or "://" in base:
            # Object stores have no atomic rename; TFX's own copy writes saved_model.pb last.
            return super().Do(input_dict, output_dict, exec_properties)
        self._log_startup(input_dict, output_dict, exec_properties)
        pushed = artifact_utils.get_single_instance(output_dict[standard_component_specs.PUSHED_MODEL_KEY])
        if not self.CheckBlessing(input_dict):
            self._MarkNotPushed(pushed)
            return
        model_path = self.GetModelPath(input_dict)
        destination, version = push_atomically(model_path, base)
        io_utils.copy_dir(model_path, pushed.uri)
        self._MarkPushed(pushed, pushed_destination=destination, pushed_version=version)
        logging.info("Model pushed to %s (version %s).", destination, version)


class ServingPusher(pusher_component.Pusher):
    """tfx Pusher with the atomic filesystem push above."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)
