"""TFX's Vertex endpoint Pusher, and the clean-up it leaves out: older models leave the endpoint.

TFX deploys each blessed model with `cloud.endpoint_traffic_percentage` of the endpoint's traffic (100 unless
a canary) and leaves the models deployed before it in place: those at 0% keep their replicas, and their bill,
until someone undeploys them. After TFX's own push this executor undeploys them, keeping the newest
`cloud.endpoint_keep_previous` (at 0% traffic) for a quick rollback; a model still serving part of a canary's
traffic stays. `promote` ends a canary: the newest model takes 100%, then the same clean-up.
"""

from __future__ import annotations

from typing import Any

from absl import logging
from tfx.extensions.google_cloud_ai_platform import constants as vertex_constants

from models.errors import UserError

KEEP_PREVIOUS_KEY = "hftfx_endpoint_keep_previous"  # our key in the Pusher's custom_config
# {"sampling_rate": r, "bigquery_table": "bq://..." or ""}: the endpoint's request-response logging; absent: left as is
REQUEST_LOGGING_KEY = "hftfx_endpoint_request_logging"


def retire_previous_models(custom_config: dict[str, Any], pushed_model: str) -> list[str]:
    """Undeploys the endpoint's models other than `pushed_model` (a Model resource name), but the newest
    `custom_config[KEEP_PREVIOUS_KEY]` of them; returns the deployed-model ids undeployed.

    Runs after TFX's push, with aiplatform initialized by it (project and region of the endpoint).
    """
    hosting = hosting_endpoint(custom_config, pushed_model)
    if hosting is None:
        return []
    endpoint, models = hosting
    endpoint_name = endpoint.display_name
    serving = {key for key, share in endpoint.traffic_split.items() if share > 0}
    previous = [m for m in models if not _same_model(m.model, pushed_model) and m.id not in serving]
    previous.sort(key=lambda m: m.create_time, reverse=True)
    retired = []
    for deployed in previous[custom_config.get(KEEP_PREVIOUS_KEY, 0) :]:
        logging.info("Undeploying %s (model %s) from endpoint %s", deployed.id, deployed.model, endpoint_name)
        endpoint.undeploy(deployed_model_id=deployed.id, sync=True)
        retired.append(deployed.id)
    return retired


def hosting_endpoint(custom_config: dict[str, Any], pushed_model: str):
    """(the aiplatform Endpoint TFX just deployed `pushed_model` to, its deployed models), or None (logged) when
    not exactly one endpoint of the configured name hosts it: display names are not unique."""
    from google.cloud import aiplatform

    endpoint_name = custom_config[vertex_constants.SERVING_ARGS_KEY]["endpoint_name"]
    named = aiplatform.Endpoint.list(filter=f'display_name="{endpoint_name}"')
    deployed = [(endpoint, endpoint.list_models()) for endpoint in named]
    hosting = [(e, models) for e, models in deployed if any(_same_model(m.model, pushed_model) for m in models)]
    if len(hosting) != 1:
        logging.warning("%d endpoints named %s host %s: left as they are", len(hosting), endpoint_name, pushed_model)
        return None
    return hosting[0]


def log_requests(custom_config: dict[str, Any], pushed_model: str) -> bool:
    """Turns on the endpoint's request-response logging to BigQuery as custom_config[REQUEST_LOGGING_KEY] says
    (what `hftfx monitor --bigquery` reads), when it is not on so already; True when it changed it.

    TFX's Vertex Pusher creates the endpoint without it and aiplatform's `Endpoint.update` cannot set it, so the
    endpoint service's own UpdateEndpoint is called with the one field in its mask."""
    from google.cloud.aiplatform_v1.types import endpoint as endpoint_types
    from google.cloud.aiplatform_v1.types import io as io_types
    from google.protobuf import field_mask_pb2

    wanted = custom_config.get(REQUEST_LOGGING_KEY)
    hosting = hosting_endpoint(custom_config, pushed_model) if wanted else None
    if hosting is None:
        return False
    endpoint = hosting[0]
    config = endpoint_types.PredictRequestResponseLoggingConfig(
        enabled=True,
        sampling_rate=wanted["sampling_rate"],
        bigquery_destination=io_types.BigQueryDestination(output_uri=wanted["bigquery_table"])
        if wanted["bigquery_table"]
        else None,
    )
    current = endpoint.gca_resource.predict_request_response_logging_config
    if current.enabled and current.sampling_rate == config.sampling_rate and (
        not wanted["bigquery_table"] or current.bigquery_destination.output_uri == wanted["bigquery_table"]
    ):
        return False
    logging.info("Logging %.0f%% of %s's requests to BigQuery", 100 * config.sampling_rate, endpoint.display_name)
    endpoint.api_client.update_endpoint(
        endpoint=endpoint_types.Endpoint(name=endpoint.resource_name, predict_request_response_logging_config=config),
        update_mask=field_mask_pb2.FieldMask(paths=["predict_request_response_logging_config"]),
    )
    return True


def promote_newest(custom_config: dict[str, Any]) -> tuple[str, list[str]]:
    """Ends a canary: the endpoint's newest deployed model takes 100% of the traffic, then the models before it
    are retired as after a push; returns (the promoted deployed-model id, the ids undeployed)."""
    from google.cloud import aiplatform

    endpoint_name = custom_config[vertex_constants.SERVING_ARGS_KEY]["endpoint_name"]
    named = aiplatform.Endpoint.list(filter=f'display_name="{endpoint_name}"')
    if len(named) != 1:
        raise PromoteError(
            f"{len(named)} endpoints are named {endpoint_name}: promote needs exactly one (see `gcloud ai "
            "endpoints list`)"
        )
    (endpoint,) = named
    models = endpoint.list_models()
    if not models:
        raise PromoteError(f"endpoint {endpoint_name} serves no model: nothing to promote")
    newest = max(models, key=lambda m: m.create_time)
    endpoint.update(traffic_split={newest.id: 100})
    return newest.id, retire_previous_models(custom_config, newest.model)


class PromoteError(UserError, RuntimeError):
    """There is no single endpoint, or no model on it, to promote."""


def _same_model(name: str, other: str) -> bool:
    return name.split("@")[0] == other.split("@")[0]
