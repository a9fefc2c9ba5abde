"""Submitting a compiled pipeline: Vertex AI Pipelines (`aiplatform.PipelineJob`) or a Kubeflow endpoint.

Requests are built first and checked offline; `--dry-run` prints the exact request instead of sending it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from models.errors import UserError
from pipeline.cloud.compiled_specs import check_spec_matches
from pipeline.cloud.profile import validate_cloud
from pipeline.cloud.vertex_jobs import api_endpoint, on_vertex
from pipeline.config.pipeline_config import ConfigError, PipelineConfig


class CredentialsError(UserError, RuntimeError):
    """No Google Cloud credentials: nothing was sent."""


def check_template(template: str | Path, config: PipelineConfig) -> dict:
    """The spec to send, once it is known to be compiled from this profile's settings (compiled_specs.py)."""
    path = Path(template)
    if not path.is_file():
        raise ConfigError(f"{path} does not exist; run `hftfx compile` first")
    check_spec_matches(path, config)
    return _yaml(path)


def _yaml(path: Path) -> dict:
    import yaml

    return yaml.safe_load(path.read_text(encoding="utf-8"))


def default_credentials():
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    except DefaultCredentialsError as error:
        raise CredentialsError(
            "no Google Cloud credentials found: run `gcloud auth application-default login` or set "
            "GOOGLE_APPLICATION_CREDENTIALS to a service account key file. Nothing was sent."
        ) from error
    return credentials


def build_pipeline_job(
    config: PipelineConfig,
    template: str | Path,
    values: Mapping[str, Any],
    credentials,
    *,
    job_id: str | None = None,
    labels: Mapping[str, str] | None = None,
    enable_caching: bool | None = None,
):
    """The aiplatform.PipelineJob for one run; creating it sends nothing.

    `job_id` fixed by the caller makes a second submission of the same run fail with AlreadyExists:
    how triggers and event handlers stay exactly-once without a lock of their own.
    """
    from google.cloud import aiplatform

    validate_cloud(config)
    if not on_vertex(config.cloud):
        raise ConfigError(
            f"the profile's cloud.orchestrator is {config.cloud.orchestrator}: submit it to Kubeflow Pipelines "
            "with --kfp-host URL, or set cloud.orchestrator: vertex and compile again for Vertex AI"
        )
    check_template(template, config)
    cloud = config.cloud
    # aiplatform takes the API host from its global settings only, so set it for every job (region default);
    # transport named, as `init` without a project otherwise switches every client to REST.
    aiplatform.init(
        project=cloud.project, location=cloud.region, api_endpoint=api_endpoint(cloud), api_transport="grpc"
    )
    return aiplatform.PipelineJob(
        display_name=config.pipeline_name,
        template_path=str(template),
        job_id=job_id,
        pipeline_root=cloud.pipeline_root,
        parameter_values=dict(values),
        enable_caching=cloud.enable_caching if enable_caching is None else enable_caching,
        labels={**cloud.labels, **(labels or {})} or None,
        encryption_spec_key_name=cloud.encryption_key or None,
        project=cloud.project,
        location=cloud.region,
        credentials=credentials,
    )


def create_job_request(job, config: PipelineConfig):
    """The CreatePipelineJobRequest `job.submit()` sends (service account and network filled in)."""
    from google.cloud import aiplatform_v1

    # The unsent resource: aiplatform exposes `gca_resource` only after creation.
    unsent = job._gca_resource
    resource = aiplatform_v1.PipelineJob.deserialize(type(unsent).serialize(unsent))
    if config.cloud.service_account:
        resource.service_account = config.cloud.service_account
    if config.cloud.network:
        resource.network = config.cloud.network
    return aiplatform_v1.CreatePipelineJobRequest(
        parent=location_path(config), pipeline_job=resource, pipeline_job_id=job.job_id
    )


def location_path(config: PipelineConfig) -> str:
    return f"projects/{config.cloud.project}/locations/{config.cloud.region}"


def request_json(request) -> dict:
    """A proto-plus request as the JSON a person reads (and --dry-run prints), snake_case keys at the top."""
    from google.protobuf import json_format

    body = json_format.MessageToDict(type(request).pb(request))
    return {"".join("_" + c.lower() if c.isupper() else c for c in key): value for key, value in body.items()}


def job_request(job, config: PipelineConfig) -> dict:
    """The CreatePipelineJob request `job.submit()` sends, as JSON: what --dry-run prints."""
    return request_json(create_job_request(job, config))


def submit_to_vertex(job, config: PipelineConfig) -> str:
    job.submit(
        service_account=config.cloud.service_account or None,
        network=config.cloud.network or None,
        experiment=config.cloud.experiment or None,
    )
    return job.resource_name


@dataclasses.dataclass(frozen=True)
class KfpRun:
    """A run on a Kubeflow Pipelines endpoint: what `kfp.Client.create_run_from_pipeline_package` gets."""

    host: str
    pipeline_file: str
    arguments: dict[str, Any]
    run_name: str
    experiment_name: str
    pipeline_root: str
    enable_caching: bool
    service_account: str | None


def kfp_run(config: PipelineConfig, host: str, template: str | Path, values: Mapping[str, Any]) -> KfpRun:
    if not host.startswith(("http://", "https://")):
        raise ConfigError(f"--kfp-host '{host}' must be an http(s) URL of a Kubeflow Pipelines API")
    validate_cloud(config)
    if config.cloud.orchestrator != "kubeflow":
        raise ConfigError(
            "--kfp-host needs a spec compiled for Kubeflow: Kubeflow Pipelines' v2 backend runs no resolver "
            "nodes and no Vertex AI CustomJob. Use a profile with cloud.orchestrator: kubeflow (e.g. "
            "configs/kubeflow.yaml) and its spec (pipeline-kubeflow.yaml)"
        )
    check_template(template, config)
    return KfpRun(
        host=host,
        pipeline_file=str(template),
        arguments=dict(values),
        run_name=f"{config.pipeline_name}-span-{values.get('span', 0)}",
        experiment_name=config.pipeline_name,
        pipeline_root=config.cloud.pipeline_root,
        enable_caching=config.cloud.enable_caching,
        service_account=config.cloud.service_account or None,
    )


def submit_to_kfp(run: KfpRun, client_factory: Callable[..., Any] | None = None):
    if client_factory is None:
        import kfp

        client_factory = kfp.Client
    client = client_factory(host=run.host)
    return client.create_run_from_pipeline_package(
        pipeline_file=run.pipeline_file,
        arguments=run.arguments,
        run_name=run.run_name,
        experiment_name=run.experiment_name,
        pipeline_root=run.pipeline_root,
        enable_caching=run.enable_caching,
        service_account=run.service_account,
    )


def span_caching_note(config: PipelineConfig, values: Mapping[str, Any]) -> str | None:
    """A warning when span 0 ("the newest") would be answered from Vertex's cache of an earlier run."""
    from components.example_gen import spans

    if spans.is_spanned(config.dataset) and not values["span"] and config.cloud.enable_caching:
        return (
            "note: span 0 reads the newest span, but with caching on Vertex reuses an earlier ExampleGen result "
            "for the same parameters; pass --param span=N, or let `hftfx trigger --cloud` choose it"
        )
    return None


def submit_run(
    config: PipelineConfig,
    template: str | Path,
    values: Mapping[str, Any],
    *,
    kfp_host: str | None = None,
    dry_run: bool = False,
) -> list[str]:
    """`hftfx submit`: one run to Kubeflow (`kfp_host`) or Vertex; the lines to print, the request on a dry run."""
    if kfp_host:
        run = kfp_run(config, kfp_host, template, values)
        if dry_run:
            return [json.dumps(dataclasses.asdict(run), indent=2)]
        result = submit_to_kfp(run)
        return [f"submitted run {getattr(result, 'run_id', result)} to {kfp_host}"]
    if dry_run:  # the exact request, built with no credentials at all
        from google.auth.credentials import AnonymousCredentials

        credentials = AnonymousCredentials()
    else:
        credentials = default_credentials()
    job = build_pipeline_job(config, template, values, credentials)
    if dry_run:
        return [json.dumps(job_request(job, config), indent=2)]
    return [f"submitted {submit_to_vertex(job, config)}"]
