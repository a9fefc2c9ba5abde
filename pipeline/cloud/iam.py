"""Who needs which IAM roles for a cloud profile, and what `hftfx doctor --cloud` can check offline.

Roles per identity, conditioned on what the profile uses (Dataflow, CMEK, an endpoint). docs/vertex.md's IAM
section is this table (pipeline/cloud/iam_test.py keeps the two equal). Nothing here calls Google Cloud: IAM
policies, quotas and API enablement can only be read online (`gcloud projects get-iam-policy`).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from pipeline.cloud.profile import validate_cloud
from pipeline.cloud.vertex_jobs import on_vertex
from pipeline.config.pipeline_config import ConfigError, PipelineConfig


@dataclasses.dataclass(frozen=True)
class Grant:
    identity: str  # who, in the words of the profile
    role: str
    why: str
    when: str = ""  # the profile setting it depends on; empty: always
    scope: str = "the project"  # the resource the grant is made on: the narrowest that works


RUNNER = "cloud.service_account (pipeline runner)"
EVENT = "retraining.event_service_account (event function)"
GRANTS = (
    Grant("you (submit, schedule, trigger)", "roles/aiplatform.user", "create pipeline jobs and schedules"),
    Grant(
        "you (submit, schedule, trigger)", "roles/iam.serviceAccountUser", "run jobs as cloud.service_account",
        scope="cloud.service_account",
    ),
    Grant(RUNNER, "roles/aiplatform.user", "the Trainer's CustomJob, the push"),
    Grant(RUNNER, "roles/storage.objectAdmin", "pipeline_root and serving_dir", scope="their buckets"),
    Grant(RUNNER, "roles/artifactregistry.reader", "pull the images", scope="the images' repository"),
    Grant(RUNNER, "roles/iam.serviceAccountUser", "CustomJob/Dataflow run as it", scope="cloud.service_account"),
    Grant(
        RUNNER, "roles/iam.serviceAccountUser", "deploy the endpoint's model as cloud.serving_service_account",
        "endpoint", scope="cloud.serving_service_account",
    ),
    Grant(RUNNER, "roles/dataflow.developer", "start Dataflow jobs", "dataflow"),
    Grant("cloud.service_account (Dataflow workers)", "roles/dataflow.worker", "run Dataflow work items", "dataflow"),
    Grant(
        "Vertex AI, Dataflow and Storage service agents", "roles/cloudkms.cryptoKeyEncrypterDecrypter",
        "use cloud.encryption_key", "cmek", scope="the key",
    ),
    Grant(RUNNER, "roles/pubsub.publisher", "the exit step's run outcome", "notify", scope="cloud.notify_topic"),
    Grant(RUNNER, "roles/secretmanager.secretAccessor", "read hub.token_secret", "hub_token", scope="that secret"),
    Grant(
        "cloud.serving_service_account", "roles/storage.objectViewer", "read the pushed model", "endpoint",
        scope="the pipeline root's bucket",
    ),
    Grant(
        "cloud.serving_service_account", "roles/storage.objectCreator", "write batch prediction results",
        "endpoint", scope="the results' bucket",
    ),
    Grant(EVENT, "roles/aiplatform.user", "create the span's pipeline job", "event"),
    Grant(EVENT, "roles/iam.serviceAccountUser", "run it as cloud.service_account", "event", "cloud.service_account"),
    Grant(EVENT, "roles/eventarc.eventReceiver", "receive the bucket's events", "event"),
    Grant(EVENT, "roles/storage.objectViewer", "re-read each event's marker by its generation", "event",
          scope="the span data's bucket"),
    Grant(EVENT, "roles/run.invoker", "Eventarc's trigger calls the function", "event", "the function's service"),
    Grant(EVENT, "roles/logging.logWriter", "the function's decision lines", "event"),
    Grant("Cloud Storage service agent", "roles/pubsub.publisher", "Eventarc's storage trigger", "event"),
)  # fmt: skip


def grants_for(config: PipelineConfig) -> list[Grant]:
    """The grants this profile needs (the event function's when it has span data)."""
    uses = {
        "dataflow": config.cloud.beam_runner == "DataflowRunner",
        "cmek": bool(config.cloud.encryption_key),
        "endpoint": config.cloud.push_to == "endpoint",
        "event": "{SPAN}" in str(config.dataset.split_files) or "{SPAN}" in str(config.dataset.data_files),
        "hub_token": bool(config.hub.token_secret),
        "notify": bool(config.cloud.notify_topic),
    }
    return [g for g in GRANTS if not g.when or uses[g.when]]


@dataclasses.dataclass(frozen=True)
class CloudCheck:
    name: str
    ok: bool
    detail: str
    required: bool = True  # a failed optional check warns (credentials may come from the VM's metadata server)


def _credentials_file() -> Path:
    """Application Default Credentials on disk, where google.auth.default looks first, without any request
    (`default()` itself would go on to probe the metadata server over the network)."""
    from google.auth import _cloud_sdk, environment_vars

    return Path(os.environ.get(environment_vars.CREDENTIALS) or _cloud_sdk.get_application_default_credentials_path())


def offline_checks(config: PipelineConfig, template: str | None) -> list[CloudCheck]:
    """What can be known without a network: the profile, its compiled spec, credentials on disk."""
    from pipeline.cloud.compiled_specs import check_spec_matches

    checks = []
    try:
        validate_cloud(config)
        checks.append(CloudCheck("profile", True, f"{config.cloud.orchestrator}, {config.cloud.project or '-'}"))
    except ConfigError as error:
        checks.append(CloudCheck("profile", False, str(error)))
    if template:
        try:
            check_spec_matches(Path(template), config)
            checks.append(CloudCheck("compiled spec", True, f"{template} matches the profile"))
        except (ConfigError, OSError) as error:
            checks.append(CloudCheck("compiled spec", False, str(error)))
    if on_vertex(config.cloud):
        found = _credentials_file()
        ok = found.is_file()
        detail = f"{found}" if ok else "none on disk: gcloud auth application-default login (on a GCP VM: its own)"
        checks.append(CloudCheck("credentials", ok, detail, required=False))
    return checks


def role_lines(config: PipelineConfig) -> list[str]:
    width = max(len(g.identity) for g in GRANTS)
    return [f"  {g.identity:<{width}}  {g.role:<37} on {g.scope}: {g.why}" for g in grants_for(config)]
