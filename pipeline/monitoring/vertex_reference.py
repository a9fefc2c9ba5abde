"""The run behind a model a Vertex AI pipeline trained: found in Vertex's own record of its runs.

A pipeline run on Vertex keeps its metadata in Vertex, not in a local sqlite. Each PipelineJob's task details list
the artifacts its steps wrote; the served folder (the Trainer's model for an endpoint, the Pusher's folder for a
bucket) lies under one of them, and the same job's ExampleGen output is the training data to compare with.
"""

from __future__ import annotations

from models.errors import UserError
from pipeline.config.pipeline_config import PipelineConfig

EXAMPLES_OUTPUT = "examples"  # ExampleGen's output key (TFX's standard name)


def _uris(job, key: str | None = None) -> list[str]:
    """The URIs of the job's output artifacts (of output `key` only, when given)."""
    return [
        artifact.uri
        for task in job.job_detail.task_details
        for name, listed in task.outputs.items()
        if key is None or name == key
        for artifact in listed.artifacts
        if artifact.uri
    ]


def wrote(job, folder: str) -> bool:
    """Whether `folder` is one of the job's output artifacts or lies inside one."""
    folder = folder.rstrip("/")
    return any(folder == uri.rstrip("/") or folder.startswith(uri.rstrip("/") + "/") for uri in _uris(job))


def list_request(config: PipelineConfig):
    from google.cloud import aiplatform_v1

    from pipeline.cloud.submit import location_path

    return aiplatform_v1.ListPipelineJobsRequest(
        parent=location_path(config), filter=f'pipeline_name="{config.pipeline_name}"', order_by="create_time desc"
    )


def vertex_run(config: PipelineConfig, client, folder: str) -> tuple[str, str]:
    """(job id, its ExampleGen's examples URI) of the newest succeeded run of the pipeline that wrote `folder`.
    `client` is a PipelineServiceClient; listed jobs are read again whole, as a listing may leave out details."""
    from google.cloud import aiplatform_v1

    succeeded = aiplatform_v1.PipelineState.PIPELINE_STATE_SUCCEEDED
    for listed in client.list_pipeline_jobs(request=list_request(config)):
        if listed.state != succeeded:
            continue
        job = client.get_pipeline_job(name=listed.name)
        examples = _uris(job, EXAMPLES_OUTPUT)
        if wrote(job, folder) and examples:
            return job.name.rsplit("/", 1)[-1], examples[0]
    raise UserError(
        f"no succeeded run of {config.pipeline_name} on Vertex AI ({config.cloud.project}, {config.cloud.region}) "
        f"wrote {folder}: give --model the folder the endpoint's model was uploaded from (its artifactUri)"
    )


def pipeline_client(config: PipelineConfig):
    from google.cloud import aiplatform_v1

    from pipeline.cloud.submit import default_credentials
    from pipeline.cloud.vertex_jobs import service_client

    return service_client(config.cloud, aiplatform_v1.PipelineServiceClient, default_credentials())
