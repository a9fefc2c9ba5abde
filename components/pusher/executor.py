"""What TFX executes for the two Pushers: the filesystem push made atomic (local_push.py, bucket_push.py), and
the Vertex endpoint push followed by the clean-up of older models (endpoint.py)."""

from __future__ import annotations

from absl import logging
from tfx.components.pusher import executor as pusher_executor
from tfx.extensions.google_cloud_ai_platform.pusher import executor as vertex_pusher_executor
from tfx.proto import pusher_pb2
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import io_utils, json_utils, proto_utils

from components.pusher.bucket_push import push_to_bucket
from components.pusher.endpoint import log_requests, retire_previous_models
from components.pusher.local_push import push_atomically
from components.vertex_clients import VERTEX_CLIENT_KEY, configure_aiplatform


class Executor(pusher_executor.Executor):
    def Do(self, input_dict, output_dict, exec_properties) -> None:
        push_destination = pusher_pb2.PushDestination()
        proto_utils.json_to_proto(exec_properties[standard_component_specs.PUSH_DESTINATION_KEY], push_destination)
        base = push_destination.filesystem.base_directory
        remote = "://" in base
        if push_destination.WhichOneof("destination") != "filesystem" or (remote and not base.startswith("gs://")):
            return super().Do(input_dict, output_dict, exec_properties)  # TFX's own copy, saved_model.pb last
        self._log_startup(input_dict, output_dict, exec_properties)
        pushed = artifact_utils.get_single_instance(output_dict[standard_component_specs.PUSHED_MODEL_KEY])
        if not self.CheckBlessing(input_dict):
            self._MarkNotPushed(pushed)
            return
        model_path = self.GetModelPath(input_dict)
        destination, version = (push_to_bucket if remote else push_atomically)(model_path, base)
        io_utils.copy_dir(model_path, pushed.uri)
        self._MarkPushed(pushed, pushed_destination=destination, pushed_version=version)
        logging.info("Model pushed to %s (version %s).", destination, version)


class EndpointExecutor(vertex_pusher_executor.Executor):
    """TFX's Vertex Pusher executor, then `retire_previous_models` and `log_requests` when a model was pushed."""

    def Do(self, input_dict, output_dict, exec_properties):
        custom_config = json_utils.loads(exec_properties[standard_component_specs.CUSTOM_CONFIG_KEY])
        configure_aiplatform(custom_config.get(VERTEX_CLIENT_KEY))
        super().Do(input_dict, output_dict, exec_properties)
        pushed = artifact_utils.get_single_instance(output_dict[standard_component_specs.PUSHED_MODEL_KEY])
        if not pushed.get_int_custom_property("pushed"):
            return
        model = pushed.get_string_custom_property("pushed_destination")
        retire_previous_models(custom_config, model)
        log_requests(custom_config, model)
