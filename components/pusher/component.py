"""The Pushers the DAG builds: TF Serving's folder layout (local or gs://), or a Vertex endpoint."""

from __future__ import annotations

from tfx.components.pusher import component as pusher_component
from tfx.dsl.components.base import executor_spec
from tfx.extensions.google_cloud_ai_platform.pusher import component as vertex_pusher_component

from components.pusher.executor import EndpointExecutor, Executor


class ServingPusher(pusher_component.Pusher):
    """tfx Pusher with the atomic filesystem push above."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)


class EndpointPusher(vertex_pusher_component.Pusher):
    """tfx.extensions.google_cloud_ai_platform.Pusher with the executor above."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(EndpointExecutor)
