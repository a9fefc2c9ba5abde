"""`hftfx predict --on vertex`: a Vertex AI batch prediction job over JSON lines in Cloud Storage.

The job runs the model the profile's endpoint serves (the one with the largest traffic share: what the Pusher
deployed last) in the same serving container, on machines Vertex starts for the job and stops after it; rows
are sent to the container as `instances` (a row's `text`, `text_pair`, and any id fields, which come back
beside each prediction). Built and sent by aiplatform's own BatchPredictionJob.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.cloud.profile import validate_cloud
from pipeline.cloud.vertex_jobs import api_endpoint, on_vertex
from pipeline.config.pipeline_config import ConfigError, PipelineConfig


def serving_model(config: PipelineConfig, credentials) -> str:
    """The Model resource name behind most of the traffic of the endpoint named cloud.endpoint_name."""
    from google.cloud import aiplatform

    cloud = config.cloud
    named = aiplatform.Endpoint.list(
        filter=f'display_name="{cloud.endpoint_name}"', project=cloud.project, location=cloud.region,
        credentials=credentials,
    )  # fmt: skip
    deployed = [(endpoint, model) for endpoint in named for model in endpoint.gca_resource.deployed_models]
    if not deployed:
        raise ConfigError(
            f"no model is deployed on an endpoint named '{cloud.endpoint_name}' in {cloud.project}/{cloud.region}: "
            "push one (cloud.push_to: endpoint) or name a Vertex Model with --model projects/.../models/ID"
        )
    _, model = max(deployed, key=lambda pair: pair[0].gca_resource.traffic_split.get(pair[1].id, 0))
    return model.model


def check_locations(inputs: Sequence[str], output_prefix: str) -> None:
    """JSON lines in Cloud Storage in, a Cloud Storage prefix out: what a Vertex job reads and writes."""
    bad = [uri for uri in inputs if not (uri.startswith("gs://") and uri.endswith(".jsonl"))]
    if not inputs or bad:
        raise ConfigError(f"--input of a Vertex batch job: JSON lines in Cloud Storage (gs://.../*.jsonl), not {bad}")
    if not output_prefix.startswith("gs://"):
        raise ConfigError(f"--output of a Vertex batch job: a gs:// prefix for its result files, not {output_prefix}")


def submit_batch_prediction(
    config: PipelineConfig,
    inputs: Sequence[str],
    output_prefix: str,
    credentials,
    *,
    model: str = "",
    max_replicas: int = 4,
):
    """Creates the job and returns it once Vertex has accepted it (the job itself runs on in the cloud)."""
    from google.cloud import aiplatform

    validate_cloud(config)
    if not on_vertex(config.cloud):
        raise ConfigError(
            f"the profile's cloud.orchestrator is {config.cloud.orchestrator}: batch jobs are Vertex AI's"
        )
    check_locations(inputs, output_prefix)
    cloud = config.cloud
    aiplatform.init(
        project=cloud.project, location=cloud.region, api_endpoint=api_endpoint(cloud), api_transport="grpc"
    )
    job = aiplatform.BatchPredictionJob.create(
        job_display_name=f"{config.pipeline_name}-batch-prediction",
        model_name=model or serving_model(config, credentials),
        instances_format="jsonl",
        predictions_format="jsonl",
        gcs_source=list(inputs),
        gcs_destination_prefix=output_prefix,
        machine_type=cloud.endpoint_machine_type,
        starting_replica_count=1,
        max_replica_count=max_replicas,
        service_account=cloud.serving_service_account or None,
        encryption_spec_key_name=cloud.encryption_key or None,
        labels=dict(cloud.labels) or None,
        project=cloud.project,
        location=cloud.region,
        credentials=credentials,
        sync=False,
    )
    job.wait_for_resource_creation()
    return job
