"""The Vertex AI API host and CMEK key for the clients TFX's Vertex extensions create inside our components.

TFX builds its CustomJob client for `<region>-aiplatform.googleapis.com` and its Pusher initializes aiplatform
with project and region only: a Private Service Connect host (`cloud.api_endpoint`) would never be used, and
the CMEK key would protect neither the uploaded Model nor a created Endpoint (aiplatform's `Model.deploy`
uses its key only when it creates the endpoint itself). The compiled custom_config carries both under
VERTEX_CLIENT_KEY; the Trainer launcher and the Pusher apply them around TFX's own code.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

VERTEX_CLIENT_KEY = "hftfx_vertex_client"  # our key in the Trainer's and Pusher's custom_config
API_ENDPOINT, ENCRYPTION_KEY = "api_endpoint", "encryption_spec_key_name"


@contextlib.contextmanager
def job_client_at(settings: Mapping[str, Any] | None) -> Iterator[None]:
    """TFX's VertexJobClient, built for `settings[API_ENDPOINT]`, while the block runs.

    TFX's runner asks `training_clients.get_job_client` for its client and offers no way to pass a host: the
    factory is swapped for the block (and restored), everything else of TFX's launch and polling is its own.
    """
    from google.cloud.aiplatform import gapic
    from tfx.extensions.google_cloud_ai_platform import training_clients

    host = (settings or {}).get(API_ENDPOINT)
    if not host:
        yield
        return

    class JobClientAtHost(training_clients.VertexJobClient):
        def create_client(self) -> None:
            self._client = gapic.JobServiceClient(client_options={"api_endpoint": host})

    original = training_clients.get_job_client

    def get_job_client(enable_vertex=False, vertex_region=None):
        return JobClientAtHost(vertex_region) if enable_vertex else original(enable_vertex, vertex_region)

    training_clients.get_job_client = get_job_client
    try:
        yield
    finally:
        training_clients.get_job_client = original


def configure_aiplatform(settings: Mapping[str, Any] | None) -> None:
    """aiplatform's global host and CMEK key, which TFX's later `aiplatform.init(project, location)` keeps:
    `Endpoint.create` and `Model.upload` take the key from there."""
    from google.cloud import aiplatform

    settings = settings or {}
    # Transport named: `init` without a project would switch every client to REST.
    aiplatform.init(
        api_endpoint=settings.get(API_ENDPOINT) or None,
        encryption_spec_key_name=settings.get(ENCRYPTION_KEY) or None,
        api_transport="grpc",
    )
