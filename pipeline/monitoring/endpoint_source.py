"""`hftfx monitor --endpoint`: the window and the model of the profile's Vertex AI endpoint, found from the endpoint.

The endpoint named cloud.endpoint_name names the rest: its request-response logging config the BigQuery table
(on once cloud.endpoint_log_sample > 0), the deployed model with the largest share of its traffic the model to
check (the newest among equals), and that model's artifactUri the SavedModel folder, so a scheduled job needs no
path that changes with each push.
"""

from __future__ import annotations

import dataclasses

from models.errors import UserError
from pipeline.config.pipeline_config import PipelineConfig


@dataclasses.dataclass(frozen=True)
class EndpointSource:
    table: str  # bq://project.dataset.table
    deployed_model_id: str
    model_dir: str  # the Model's artifactUri


def _serving_model(endpoint):
    """The deployed model with the largest traffic share; the newest among equal shares."""
    if not endpoint.deployed_models:
        raise UserError(f"endpoint {endpoint.display_name} ({endpoint.name}) has no deployed model to monitor")
    share = dict(endpoint.traffic_split)
    return max(endpoint.deployed_models, key=lambda m: (share.get(m.id, 0), m.create_time.timestamp()))


def endpoint_source(config: PipelineConfig, endpoints, models) -> EndpointSource:
    """The profile's endpoint's log table, serving deployed model and its folder; `endpoints` and `models` are
    Vertex's EndpointServiceClient and ModelServiceClient."""
    from google.cloud import aiplatform_v1

    from pipeline.cloud.submit import location_path

    name = config.cloud.endpoint_name
    request = aiplatform_v1.ListEndpointsRequest(parent=location_path(config), filter=f'display_name="{name}"')
    found = list(endpoints.list_endpoints(request=request))
    if len(found) != 1:
        raise UserError(f"{len(found)} endpoints are named {name} in {location_path(config)}: the monitor needs one")
    endpoint = found[0]
    logging = endpoint.predict_request_response_logging_config
    table = logging.bigquery_destination.output_uri
    if not (logging.enabled and table):
        raise UserError(
            f"endpoint {name} does not log requests to BigQuery: set cloud.endpoint_log_sample (e.g. 0.1) and push "
            "again, or give --bigquery and --model"
        )
    deployed = _serving_model(endpoint)
    return EndpointSource(table, deployed.id, models.get_model(name=deployed.model).artifact_uri)


def endpoint_source_of(config: PipelineConfig) -> EndpointSource:
    """endpoint_source with the profile's clients and the machine's credentials."""
    from google.cloud import aiplatform_v1

    from pipeline.cloud.submit import default_credentials
    from pipeline.cloud.vertex_jobs import service_client

    credentials = default_credentials()
    endpoints = service_client(config.cloud, aiplatform_v1.EndpointServiceClient, credentials)
    models = service_client(config.cloud, aiplatform_v1.ModelServiceClient, credentials)
    return endpoint_source(config, endpoints, models)
