"""A cloud profile's checks, every one before anything compiles: where the parts run, the Beam runner, the
orchestrator, the push, the identity, the data and the accelerators (machines.py), each problem named with its fix.
Pure functions of the typed config, so every profile is checked offline; the settings they allow are built in
vertex_jobs.py."""

from __future__ import annotations

import re
from pathlib import Path

from models.hub.pretrained import PACKAGED_PREFIX
from models.training.lengths import AUTO
from models.training.packing import why_not_packed
from pipeline.cloud.machines import (
    ACCELERATOR_IMAGE_TARGETS,
    ACCELERATORS,
    GPU_FAMILIES,
    GPU_MACHINES,
    LARGEST_TPU,
    Accelerator,
    accelerator,
)
from pipeline.cloud.vertex_jobs import beam_args, on_vertex
from pipeline.config.cloud import CloudConfig
from pipeline.config.pipeline_config import ConfigError, PipelineConfig

# Regions with TPU v5e VMs (cloud.google.com/tpu/docs/regions-zones): a v5e placement elsewhere fails at
# CustomJob creation, after the pipeline's data steps ran.
TPU_V5E_REGIONS = ("us-central1", "us-south1", "us-west1", "us-west4", "europe-west4", "asia-southeast1")
_NETWORK = re.compile(r"^projects/\d+/global/networks/[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
# Google Cloud labels: keys start with a lowercase letter; keys and values use lowercase letters, digits, '_'
# and '-', at most 63 characters (international letters are allowed too; this checks the ASCII subset).
_LABEL_KEY, _LABEL_VALUE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$"), re.compile(r"^[a-z0-9_-]{0,63}$")
_GCS = re.compile(r"^gs://[a-z0-9][-_.a-z0-9]{1,220}(/.*)?$")
_PROJECT = re.compile(r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$")
_TOPIC = re.compile(r"^(?!goog)[A-Za-z][-A-Za-z0-9_.~+%]{2,254}$")  # Pub/Sub's rule for a topic id


def _is_pushed_image(uri: str) -> bool:
    """An image reference with a tag or digest (what a cloud service can pull)."""
    return bool(uri) and (":" in uri.rsplit("/", 1)[-1] or "@" in uri)


_EXPERIMENT = re.compile(r"^[a-z0-9][a-z0-9-]{0,127}$")


_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def validate_cloud(config: PipelineConfig) -> None:
    """Everything a Vertex submission needs, checked before anything is compiled or sent."""
    cloud = config.cloud
    problems = [
        *_place_problems(cloud),
        *_beam_problems(cloud),
        *_orchestrator_problems(cloud),
        *_push_problems(config),
        *_identity_problems(cloud),
        *_label_set_problems(config),
    ]
    if not problems and cloud.beam_runner == "DataflowRunner":
        problems += [f"Dataflow option: {e}" for e in dataflow_option_errors(beam_args(config))]
    problems += _data_problems(config) + _accelerator_problems(config)
    if problems:
        raise ConfigError("invalid cloud profile:\n  - " + "\n  - ".join(problems))


def _place_problems(cloud: CloudConfig) -> list[str]:
    """The project, region, pipeline root and image every cloud run needs."""
    problems: list[str] = []
    if on_vertex(cloud) or cloud.beam_runner == "DataflowRunner":  # services of a Google Cloud project
        if not _PROJECT.match(cloud.project):
            problems.append(f"cloud.project '{cloud.project}' is not a Google Cloud project id (set cloud.project)")
        if not re.match(r"^[a-z]+-[a-z]+\d+$", cloud.region):
            problems.append(f"cloud.region '{cloud.region}' is not a region such as us-central1")
    if not _GCS.match(cloud.pipeline_root):
        problems.append(f"cloud.pipeline_root '{cloud.pipeline_root}' must be a gs://bucket/path")
    if not _is_pushed_image(cloud.image_uri):
        problems.append(f"cloud.image_uri '{cloud.image_uri}' must name a pushed image with a tag or digest")
    return problems


def _beam_problems(cloud: CloudConfig) -> list[str]:
    """The data components' Beam runner: Dataflow's worker image and network."""
    problems: list[str] = []
    if cloud.beam_runner == "DataflowRunner" and not _is_pushed_image(cloud.dataflow_image_uri):
        problems.append(
            f"cloud.dataflow_image_uri '{cloud.dataflow_image_uri}' must name the pushed image of the Dockerfile's "
            "dataflow target (Beam's boot program as entrypoint) for Dataflow workers; or set cloud.beam_runner: "
            "DirectRunner"
        )
    elif cloud.beam_runner == "DataflowRunner" and cloud.dataflow_image_uri == cloud.image_uri:
        problems.append(
            "cloud.dataflow_image_uri is the pipeline image, which Dataflow cannot start as a worker (no "
            "/opt/apache/beam/boot entrypoint): build the Dockerfile's dataflow target and name that image"
        )
    if cloud.beam_runner == "DataflowRunner" and cloud.network and not cloud.dataflow_subnetwork:
        problems.append(
            "cloud.network is set but Dataflow workers would start on the project's default network: set "
            "cloud.dataflow_subnetwork to a subnetwork of it (regions/<region>/subnetworks/<name>)"
        )
    if cloud.dataflow_subnetwork and not re.search(
        r"(^|/)regions/[a-z0-9-]+/subnetworks/[^/]+$", cloud.dataflow_subnetwork
    ):
        problems.append(
            f"cloud.dataflow_subnetwork '{cloud.dataflow_subnetwork}' is not regions/<region>/subnetworks/<name>"
        )
    return problems


def _orchestrator_problems(cloud: CloudConfig) -> list[str]:
    """Vertex AI or Kubeflow, and what only Vertex AI offers."""
    problems: list[str] = []
    if cloud.orchestrator == "kubeflow":
        if cloud.push_to != "filesystem":
            problems.append("cloud.push_to: endpoint deploys to Vertex AI; with orchestrator kubeflow use filesystem")
        if cloud.trainer_accelerator != "cpu":
            problems.append(
                f"cloud.trainer_accelerator '{cloud.trainer_accelerator}' is a Vertex AI CustomJob placement; with "
                "orchestrator kubeflow the Trainer runs in its pod: leave it cpu and give the cluster's nodes GPUs"
            )
    if cloud.experiment and not _EXPERIMENT.match(cloud.experiment):
        problems.append(
            f"cloud.experiment '{cloud.experiment}' is not a Vertex AI Experiment name (lowercase letters, digits, "
            "'-'; starts with a letter or digit; at most 128 characters)"
        )
    topic_id = cloud.notify_topic.rsplit("/", 1)[-1]
    whole = re.match(r"^projects/([^/]+)/topics/[^/]+$", cloud.notify_topic)
    if cloud.notify_topic and (not _TOPIC.match(topic_id) or ("/" in cloud.notify_topic and not whole)):
        problems.append(
            f"cloud.notify_topic '{cloud.notify_topic}' is not a Pub/Sub topic: projects/<project>/topics/<name> or "
            "a name of 3-255 letters, digits and - _ . ~ + %, starting with a letter (not 'goog')"
        )
    elif whole and not _PROJECT.match(whole.group(1)):
        problems.append(f"cloud.notify_topic '{cloud.notify_topic}' names no Google Cloud project id")
    elif cloud.notify_topic and "/" not in cloud.notify_topic and not _PROJECT.match(cloud.project):
        problems.append(f"cloud.notify_topic '{cloud.notify_topic}' needs cloud.project, or name it whole")
    if cloud.experiment and not on_vertex(cloud):
        problems.append("cloud.experiment is a Vertex AI Experiment; with orchestrator kubeflow leave it empty")
    return problems


def _push_problems(config: PipelineConfig) -> list[str]:
    """Where a blessed model goes: a serving folder in Cloud Storage or a Vertex endpoint."""
    cloud = config.cloud
    problems: list[str] = []
    if cloud.push_to == "endpoint" and not cloud.endpoint_name:
        problems.append("cloud.push_to is endpoint but cloud.endpoint_name is empty")
    if cloud.endpoint_keep_previous < 0:
        problems.append(f"cloud.endpoint_keep_previous must be 0 or more, not {cloud.endpoint_keep_previous}")
    if cloud.endpoint_min_replicas < 1:
        problems.append(f"cloud.endpoint_min_replicas must be 1 or more, not {cloud.endpoint_min_replicas}")
    if cloud.endpoint_max_replicas and cloud.endpoint_max_replicas < cloud.endpoint_min_replicas:
        problems.append(
            f"cloud.endpoint_max_replicas {cloud.endpoint_max_replicas} is below endpoint_min_replicas "
            f"{cloud.endpoint_min_replicas}: set it to at least that, or 0 for the same"
        )
    if not 1 <= cloud.endpoint_traffic_percentage <= 100:
        problems.append(f"cloud.endpoint_traffic_percentage must be 1 to 100, not {cloud.endpoint_traffic_percentage}")
    gpus = sorted(name for name, a in ACCELERATORS.items() if a.kind == "gpu")
    if cloud.endpoint_accelerator and cloud.endpoint_accelerator not in gpus:
        problems.append(f"cloud.endpoint_accelerator '{cloud.endpoint_accelerator}' is not one of {gpus}")
    elif cloud.endpoint_accelerator:
        family = GPU_FAMILIES[cloud.endpoint_accelerator]
        if not cloud.endpoint_machine_type.startswith(family):
            smallest = GPU_MACHINES[cloud.endpoint_accelerator][min(GPU_MACHINES[cloud.endpoint_accelerator])]
            problems.append(
                f"cloud.endpoint_accelerator {cloud.endpoint_accelerator} runs on {family}* machines, not "
                f"{cloud.endpoint_machine_type}: set cloud.endpoint_machine_type (e.g. {smallest})"
            )
    if cloud.push_to == "filesystem" and not _GCS.match(config.serving_dir):
        problems.append(f"serving_dir '{config.serving_dir}' must be a gs:// path when the pipeline runs in the cloud")
    return problems


def _identity_problems(cloud: CloudConfig) -> list[str]:
    """Service account, network, labels and CMEK key, in the forms Vertex AI takes."""
    problems: list[str] = []
    if on_vertex(cloud) and not cloud.service_account:
        problems.append(
            "cloud.service_account is empty: the run would go as the project's default Compute Engine identity "
            "(broad Editor rights, shared with everything else): name the pipeline's own service account "
            "(`hftfx doctor --cloud` lists the roles it needs)"
        )
    if on_vertex(cloud) and cloud.push_to == "endpoint" and not cloud.serving_service_account:
        problems.append(
            "cloud.serving_service_account is empty: the endpoint's replicas would run as Vertex's service agent; "
            "name a service account that may read the pushed model (and nothing else)"
        )
    if on_vertex(cloud) and cloud.service_account and not cloud.service_account.endswith(".iam.gserviceaccount.com"):
        problems.append(f"cloud.service_account '{cloud.service_account}' is not a service account email")
    if not on_vertex(cloud) and cloud.service_account and not _K8S_NAME.match(cloud.service_account):
        problems.append(f"cloud.service_account '{cloud.service_account}' is not a Kubernetes service account name")
    if cloud.network and not _NETWORK.match(cloud.network):
        problems.append(
            f"cloud.network '{cloud.network}' must be projects/<project NUMBER>/global/networks/<name>: Vertex AI "
            "peering takes the project number, not its id "
            "(gcloud projects describe PROJECT --format='value(projectNumber)')"
        )
    problems += _label_problems(cloud.labels)
    if cloud.encryption_key and not cloud.encryption_key.startswith("projects/"):
        problems.append("cloud.encryption_key must be a full Cloud KMS key name (projects/.../cryptoKeys/...)")
    return problems


def _label_set_problems(config: PipelineConfig) -> list[str]:
    """A compiled pipeline reads no data at compile time: its label set is declared."""
    problems: list[str] = []
    if not config.dataset.label_names:
        problems.append(
            "dataset.label_names must be declared for a compiled pipeline (no data is read at compile time)"
        )
    return problems


def _data_problems(config: PipelineConfig) -> list[str]:
    """Inputs the cloud can read (gs:// or hub ids) and publishing it cannot do yet."""
    problems: list[str] = []
    if config.dataset.name.startswith(("/", ".", "~")) or (
        config.dataset.data_files and any(not f.startswith("gs://") for f in config.dataset.data_files)
    ):
        problems.append("dataset files must be hub ids or gs:// paths in the cloud; local paths do not exist there")
    model = config.model.name
    if not model.startswith((PACKAGED_PREFIX, "gs://")) and (model.startswith(("/", ".", "~")) or Path(model).exists()):
        problems.append(
            f"model.name '{model}' is a local folder, which does not exist in the cloud: copy it to a bucket "
            "(gcloud storage cp -r FOLDER gs://BUCKET/models/NAME) and name that gs:// folder, or use a hub id"
        )
    if config.scoring.input and not config.scoring.input.startswith("gs://"):
        problems.append(f"scoring.input '{config.scoring.input}' must be a gs:// path in the cloud")
    if config.model.max_seq_length == AUTO:
        problems.append(
            "model.max_seq_length: auto is chosen from the texts at a local run's preflight, and a compiled spec "
            "fixes the width: set a number (`hftfx run --check` on a sample of the data prints what auto chooses)"
        )
    if config.model.long_texts == "windows" and config.model.max_windows == AUTO:
        problems.append(
            "model.max_windows: auto is chosen from the texts at a local run's preflight, and a compiled spec "
            "fixes the Transform's windows: set a number (`hftfx run --check --long-texts windows` on a sample of "
            "the data prints what auto chooses)"
        )
    if config.hub.repo_id and not config.hub.token_secret:
        problems.append(
            "hub.repo_id: a cloud run pushes with the token in a Secret Manager secret: set hub.token_secret to its "
            "version (projects/<project>/secrets/<name>/versions/<number>; the runner's service account needs "
            "roles/secretmanager.secretAccessor on it), or leave hub.repo_id empty: the blessed model's HF export is "
            "still in the run's HFPublisher artifact"
        )
    return problems


def _accelerator_problems(config: PipelineConfig) -> list[str]:
    """The Trainer's placement: TPU regions and batch sizes, the image an accelerator needs."""
    cloud = config.cloud
    problems: list[str] = []
    try:
        chosen = accelerator(cloud)
        if chosen.kind == "tpu" and on_vertex(cloud) and cloud.region not in TPU_V5E_REGIONS:
            problems.append(
                f"cloud.trainer_accelerator {cloud.trainer_accelerator} in {cloud.region}: TPU v5e VMs are in "
                f"{', '.join(TPU_V5E_REGIONS)} (cloud.google.com/tpu/docs/regions-zones); pick one as cloud.region"
            )
        if chosen.kind == "tpu" and config.training.batch_size % 8:
            problems.append("TPU training wants training.batch_size divisible by 8 (per-core batches of equal size)")
        problems += _worker_problems(config, chosen)
        problems += _packing_problems(config, chosen)
        if chosen.kind in ACCELERATOR_IMAGE_TARGETS and cloud.trainer_image_uri in ("", cloud.image_uri):
            problems.append(
                f"cloud.trainer_accelerator {cloud.trainer_accelerator} needs cloud.trainer_image_uri: the pipeline "
                f"image's TensorFlow has {ACCELERATOR_IMAGE_TARGETS[chosen.kind]}"
            )
    except ConfigError as error:
        problems.append(str(error))
    return problems


def _packing_problems(config: PipelineConfig, chosen: Accelerator) -> list[str]:
    """training.packing: true where the cloud Trainer cannot pack: a TPU, or replicas splitting each batch."""
    if config.training.packing is not True:
        return []
    replicas = chosen.replicas * config.cloud.trainer_workers
    cannot = why_not_packed(replicas=replicas, windows=False, width=0, fixed_shapes=chosen.kind == "tpu")
    if cannot is None:
        return []
    return [f"training.packing: true, but on {config.cloud.trainer_accelerator or 'the CPU'} {cannot}: set "
            "training.packing to auto (it packs where the Trainer can) or false"]  # fmt: skip


def _worker_problems(config: PipelineConfig, chosen: Accelerator) -> list[str]:
    """Several workers and Spot VMs: where the Trainer can run them."""
    cloud = config.cloud
    problems: list[str] = []
    several = cloud.trainer_workers > 1
    if several and chosen.kind == "tpu":
        problems.append(
            f"cloud.trainer_workers {cloud.trainer_workers} with {cloud.trainer_accelerator}: several TPU hosts would "
            "train one model only as a multi-host slice, which TensorFlow reaches through the TPU pod runtime; the "
            "tpu image runs TensorFlow on PJRT with libtpu, documented for single-host v5e, and Vertex AI offers "
            f"no TensorFlow multi-host slice on it. Nearest that works: {LARGEST_TPU} (8 chips, one host), or GPU "
            "workers (e.g. trainer_accelerator: a100 with trainer_workers)"
        )
    if (several or cloud.trainer_spot) and not on_vertex(cloud):
        problems.append(
            "cloud.trainer_workers and cloud.trainer_spot shape the Trainer's Vertex AI CustomJob; with orchestrator "
            "kubeflow the Trainer runs in its pod: set trainer_workers: 1 and trainer_spot: false"
        )
    if several and config.training.cpu_replicas > 1:
        problems.append(
            "training.cpu_replicas splits one machine's CPU into devices (a local test of MirroredStrategy); with "
            "cloud.trainer_workers > 1 set it to 1"
        )
    return problems


def _label_problems(labels) -> list[str]:
    problems = [f"cloud.labels has {len(labels)} labels; Google Cloud takes at most 64"] if len(labels) > 64 else []
    for key, value in labels.items():
        if not _LABEL_KEY.match(str(key)):
            problems.append(
                f"cloud.labels key '{key}' must start with a lowercase letter and hold only lowercase letters, "
                "digits, '_' and '-' (at most 63 characters)"
            )
        if not _LABEL_VALUE.match(str(value)):
            problems.append(
                f"cloud.labels value '{value}' (of '{key}') may hold only lowercase letters, digits, '_' and '-' "
                "(at most 63 characters)"
            )
    return problems


def dataflow_option_errors(args: list[str]) -> list[str]:
    """What Beam's own validator says of these arguments for the Dataflow service (the checks
    DataflowRunner.run_pipeline makes before submitting), without touching Cloud Storage (`--dry_run`)."""
    from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions
    from apache_beam.options.pipeline_options_validator import PipelineOptionsValidator
    from apache_beam.runners.dataflow.dataflow_runner import DataflowRunner

    options = PipelineOptions([*args, "--dry_run=True"])
    validator = PipelineOptionsValidator(options, DataflowRunner())
    google = options.view_as(GoogleCloudOptions)
    # Beam would create a default bucket over the network when both locations are bad: report them instead.
    locations = validator.validate_gcs_path(google, "temp_location") + validator.validate_gcs_path(
        google, "staging_location"
    )
    return locations or validator.validate()
