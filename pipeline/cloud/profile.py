"""The Google Cloud side of the pipeline: accelerator catalogue, Vertex job settings, profile checks.

Pure functions from the typed config to the dicts TFX's Vertex extensions and Vertex AI expect, so every
request can be checked offline. TFX is imported only where its keys are needed: submitting and the
storage-event function validate a profile without TensorFlow.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from pathlib import Path

from components.vertex_clients import API_ENDPOINT, ENCRYPTION_KEY, VERTEX_CLIENT_KEY
from models.hub.hub_token import TOKEN_SECRET_ENV
from models.hub.pretrained import PACKAGED_PREFIX
from models.training.lengths import AUTO
from pipeline.config.cloud import CloudConfig
from pipeline.config.pipeline_config import MULTI_PROCESSING_BEAM_ARGS, ConfigError, PipelineConfig


@dataclasses.dataclass(frozen=True)
class Accelerator:
    """One Vertex AI training machine: machine type, accelerator type and count (none for TPU VMs)."""

    kind: str  # cpu | gpu | tpu
    machine_type: str
    accelerator_type: str = ""
    accelerator_count: int = 0
    tpu_topology: str = ""

    @property
    def replicas(self) -> int:
        """Devices training replicates over on one machine: its GPUs, its TPU chips (ct5lp-hightpu-<n>t), else 1."""
        if self.kind == "tpu":
            return int(re.fullmatch(r"ct5lp-hightpu-(\d+)t", self.machine_type).group(1))
        return self.accelerator_count if self.kind == "gpu" else 1


# Names users pick from. TPU VM machine types (ct5lp) carry their chips, so no accelerator_type. Vertex AI
# custom training offers TPU v2, v3 and v5e VMs, v5e for TensorFlow 2.15+
# (cloud.google.com/vertex-ai/docs/training/training-with-tpu-vm).
ACCELERATORS = {
    "cpu": Accelerator("cpu", "n1-standard-8"),
    "t4": Accelerator("gpu", "n1-standard-8", "NVIDIA_TESLA_T4", 1),
    "v100": Accelerator("gpu", "n1-standard-8", "NVIDIA_TESLA_V100", 1),
    "l4": Accelerator("gpu", "g2-standard-8", "NVIDIA_L4", 1),
    "a100": Accelerator("gpu", "a2-highgpu-1g", "NVIDIA_TESLA_A100", 1),
    "a100-80gb": Accelerator("gpu", "a2-ultragpu-1g", "NVIDIA_A100_80GB", 1),
    "h100": Accelerator("gpu", "a3-highgpu-8g", "NVIDIA_H100_80GB", 8),
    "tpu-v5e-1": Accelerator("tpu", "ct5lp-hightpu-1t", tpu_topology="1x1"),
    "tpu-v5e-4": Accelerator("tpu", "ct5lp-hightpu-4t", tpu_topology="2x2"),
    "tpu-v5e-8": Accelerator("tpu", "ct5lp-hightpu-8t", tpu_topology="2x4"),
}

# Asked for by users, refused with the reason instead of emitting a job that cannot run.
REFUSED_ACCELERATORS = {
    **{
        f"tpu-v6e-{chips}": "Vertex AI trains on TPU v6e with JAX and PyTorch only, not TensorFlow "
        "(cloud.google.com/vertex-ai/docs/training/training-with-tpu-vm)"
        for chips in (1, 4, 8)
    },
    "tpu-v5p-8": "TPU v5p is not among the TPU VMs Vertex AI custom training offers (v2, v3, v5e)",
    # The tpu image runs TensorFlow on PJRT with libtpu from PyPI (tensorflow-tpu 2.20 and the libtpu it
    # declares): the route Cloud TPU documents for TensorFlow on v5e. v2/v3 VMs are not on it.
    **{
        f"tpu-{version}-8": f"TPU {version} trains TensorFlow through an older TPU runtime than the PJRT/libtpu "
        "route the Dockerfile's tpu target takes (documented for v5e); use tpu-v5e-1|4|8"
        for version in ("v2", "v3")
    },
}
# Regions with TPU v5e VMs (cloud.google.com/tpu/docs/regions-zones): a v5e placement elsewhere fails at
# CustomJob creation, after the pipeline's data steps ran.
TPU_V5E_REGIONS = ("us-central1", "us-south1", "us-west1", "us-west4", "europe-west4", "asia-southeast1")

# GPUs per machine: A2, A3 and G2 machine types come with a fixed number; N1 machines take T4s or V100s in
# the counts Compute Engine allows, on a machine big enough for them.
GPU_MACHINES = {
    "t4": {1: "n1-standard-8", 2: "n1-standard-16", 4: "n1-standard-32"},
    "v100": {1: "n1-standard-8", 2: "n1-standard-16", 4: "n1-standard-32", 8: "n1-standard-64"},
    "l4": {1: "g2-standard-8", 2: "g2-standard-24", 4: "g2-standard-48", 8: "g2-standard-96"},
    "a100": {1: "a2-highgpu-1g", 2: "a2-highgpu-2g", 4: "a2-highgpu-4g", 8: "a2-highgpu-8g", 16: "a2-megagpu-16g"},
    "a100-80gb": {1: "a2-ultragpu-1g", 2: "a2-ultragpu-2g", 4: "a2-ultragpu-4g", 8: "a2-ultragpu-8g"},
    "h100": {8: "a3-highgpu-8g"},
}
# The machine family each GPU is attached to (Compute Engine's GPU platforms).
GPU_FAMILIES = {
    "t4": "n1-", "v100": "n1-", "l4": "g2-", "a100": "a2-highgpu-", "a100-80gb": "a2-ultragpu-", "h100": "a3-"
}  # fmt: skip
_G2_GPUS = {4: 1, 8: 1, 12: 1, 16: 1, 32: 1, 24: 2, 48: 4, 96: 8}


def fixed_gpu_count(machine_type: str) -> int | None:
    """The GPUs an A2, A3 or G2 machine type comes with; None for machine types that take a chosen count."""
    if match := re.fullmatch(r"a[23]-(?:high|ultra|mega|edge)gpu-(\d+)g", machine_type):
        return int(match.group(1))
    if match := re.fullmatch(r"g2-standard-(\d+)", machine_type):
        return _G2_GPUS.get(int(match.group(1)))
    return None


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


def accelerator(cloud: CloudConfig) -> Accelerator:
    """The Trainer's machine: the named placement, sized by trainer_accelerator_count and trainer_machine_type,
    refused with the reason when Vertex AI could not run it."""
    name = cloud.trainer_accelerator
    if name in REFUSED_ACCELERATORS:
        raise ConfigError(
            f"cloud.trainer_accelerator '{name}': {REFUSED_ACCELERATORS[name]}. Pick one of {sorted(ACCELERATORS)}"
        )
    if name not in ACCELERATORS:
        raise ConfigError(f"cloud.trainer_accelerator '{name}' is unknown; pick one of {sorted(ACCELERATORS)}")
    chosen = ACCELERATORS[name]
    count = cloud.trainer_accelerator_count
    if count and chosen.kind != "gpu":
        raise ConfigError(f"cloud.trainer_accelerator_count is for GPUs; '{name}' is sized by its name. Set it to 0.")
    if chosen.kind == "gpu" and count and not cloud.trainer_machine_type:
        machines = GPU_MACHINES[name]
        if count not in machines:
            raise ConfigError(
                f"cloud.trainer_accelerator_count {count}: Vertex AI machines take {name} GPUs in counts "
                f"{sorted(machines)}"
            )
        chosen = dataclasses.replace(chosen, machine_type=machines[count], accelerator_count=count)
    if cloud.trainer_machine_type:
        chosen = dataclasses.replace(chosen, machine_type=cloud.trainer_machine_type)
        if count:
            chosen = dataclasses.replace(chosen, accelerator_count=count)
        fixed = fixed_gpu_count(chosen.machine_type) if chosen.kind == "gpu" else None
        if fixed is not None and fixed != chosen.accelerator_count:
            raise ConfigError(
                f"cloud.trainer_machine_type {chosen.machine_type} comes with {fixed} GPU(s), not "
                f"{chosen.accelerator_count}: set cloud.trainer_accelerator_count to {fixed}, or leave "
                "trainer_machine_type empty and the count picks the machine"
            )
    return chosen


# Why the pipeline image (Dockerfile target cpu) cannot train on an accelerator, and which image can.
ACCELERATOR_IMAGE_TARGETS = {
    "gpu": "GPU kernels but no CUDA libraries (it would train on the CPU): build the Dockerfile's gpu target",
    "tpu": "no TPU support: build the Dockerfile's tpu target (TensorFlow 2.20 for TPU and libtpu, "
    "tpu-requirements.txt)",
}
_EXPERIMENT = re.compile(r"^[a-z0-9][a-z0-9-]{0,127}$")
_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def on_vertex(cloud: CloudConfig) -> bool:
    """Vertex AI Pipelines runs the spec: the Trainer goes to a CustomJob, the baseline resolver runs."""
    return cloud.orchestrator == "vertex"


def api_endpoint(cloud: CloudConfig) -> str:
    """The Vertex AI API host the submission, trigger and schedule clients talk to."""
    return cloud.api_endpoint or f"{cloud.region}-aiplatform.googleapis.com"


def notify_topic_path(cloud: CloudConfig) -> str:
    """projects/<project>/topics/<name> of cloud.notify_topic ("" when there is none)."""
    topic = cloud.notify_topic
    return topic if not topic or topic.startswith("projects/") else f"projects/{cloud.project}/topics/{topic}"


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
        if chosen.kind in ACCELERATOR_IMAGE_TARGETS and cloud.trainer_image_uri in ("", cloud.image_uri):
            problems.append(
                f"cloud.trainer_accelerator {cloud.trainer_accelerator} needs cloud.trainer_image_uri: the pipeline "
                f"image's TensorFlow has {ACCELERATOR_IMAGE_TARGETS[chosen.kind]}"
            )
    except ConfigError as error:
        problems.append(str(error))
    return problems


# The placement nearest a multi-host TPU slice that trains TensorFlow here.
LARGEST_TPU = "tpu-v5e-8"


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


def trainer_image(cloud: CloudConfig) -> str:
    return cloud.trainer_image_uri or cloud.image_uri


def serving_image(cloud: CloudConfig) -> str:
    return cloud.serving_image_uri or cloud.image_uri


def container_env(config: PipelineConfig) -> dict[str, str]:
    """Variables every container of a cloud run gets: the Hub token's secret version (never the token), which
    the components that reach the Hub read at run time (models/hub/hub_token.py)."""
    return {TOKEN_SECRET_ENV: config.hub.token_secret} if config.hub.token_secret else {}


def worker_pool_specs(cloud: CloudConfig, env: dict[str, str] | None = None) -> list[dict]:
    """The Vertex CustomJob's worker pools the Trainer runs in (TFX fills in each container's command), with `env`
    in their containers: the chief's pool, then with cloud.trainer_workers > 1 a pool of the other workers on the
    same machine (Vertex AI sets TF_CONFIG on each replica: "chief", then "worker" 0, 1, ...)."""
    chosen = accelerator(cloud)
    machine_spec = {"machine_type": chosen.machine_type}
    if chosen.accelerator_type:
        machine_spec["accelerator_type"] = chosen.accelerator_type
        machine_spec["accelerator_count"] = chosen.accelerator_count
    if chosen.tpu_topology:
        machine_spec["tpu_topology"] = chosen.tpu_topology
    pool = {
        "machine_spec": machine_spec,
        "replica_count": 1,
        "disk_spec": {"boot_disk_type": "pd-ssd", "boot_disk_size_gb": 100},
        "container_spec": {
            "image_uri": trainer_image(cloud),
            **({"env": [{"name": k, "value": v} for k, v in env.items()]} if env else {}),
        },
    }
    workers = [{**copy.deepcopy(pool), "replica_count": cloud.trainer_workers - 1}] if cloud.trainer_workers > 1 else []
    return [pool, *workers]


def scheduling(cloud: CloudConfig) -> dict:
    """The CustomJob's scheduling: Spot VMs when asked; and with several workers or spot, a restart of the whole
    job when one replica restarts. A restarted worker cannot rejoin the others' all-reduce mid-run; restarted
    together, they all resume from the last checkpoint in the pipeline root."""
    settings: dict = {}
    if cloud.trainer_spot:
        settings["strategy"] = "SPOT"
    if cloud.trainer_spot or cloud.trainer_workers > 1:
        settings["restart_job_on_worker_restart"] = True
    return settings


def vertex_training_config(cloud: CloudConfig, env: dict[str, str] | None = None) -> dict:
    """The keys TFX's Vertex Trainer reads from custom_config.

    TFX's runner pops `project`, then `VertexJobClient.create_training_job` takes `job_spec` as the
    CustomJobSpec and `labels` / `encryption_spec` as the CustomJob's own fields; without a `job_spec` key it
    would treat the whole dict as the spec, which the API rejects (labels are no CustomJobSpec field).
    """
    job_spec = {"worker_pool_specs": worker_pool_specs(cloud, env)}
    if scheduled := scheduling(cloud):
        job_spec["scheduling"] = scheduled
    if cloud.service_account:
        job_spec["service_account"] = cloud.service_account
    if cloud.network:
        job_spec["network"] = cloud.network
    from tfx.extensions.google_cloud_ai_platform import constants as vertex_constants
    from tfx.extensions.google_cloud_ai_platform.trainer import executor as vertex_trainer_executor

    job = {"project": cloud.project, "job_spec": job_spec, "labels": dict(cloud.labels)}
    if cloud.encryption_key:
        job["encryption_spec"] = {"kms_key_name": cloud.encryption_key}
    return {
        vertex_constants.ENABLE_VERTEX_KEY: True,
        vertex_constants.VERTEX_REGION_KEY: cloud.region,
        vertex_trainer_executor.TRAINING_ARGS_KEY: job,
        VERTEX_CLIENT_KEY: vertex_client_settings(cloud),
    }


def vertex_tuning_config(cloud: CloudConfig, env: dict[str, str] | None = None) -> dict:
    """The keys TFX's Vertex Tuner reads: the Trainer's CustomJob under its tuning key. TFX adds the worker pool of
    the parallel trials beyond the chief's (a copy of the first pool, tuning.parallel_trials - 1 replicas). Each
    trial trains on one machine, on demand: trainer_workers and trainer_spot are the Trainer's."""
    from tfx.extensions.google_cloud_ai_platform.trainer import executor as vertex_trainer_executor
    from tfx.extensions.google_cloud_ai_platform.tuner import executor as vertex_tuner_executor

    alone = cloud.model_copy(update={"trainer_workers": 1, "trainer_spot": False})
    settings = vertex_training_config(alone, env)
    job = settings.pop(vertex_trainer_executor.TRAINING_ARGS_KEY)
    return {**settings, vertex_tuner_executor.TUNING_ARGS_KEY: job}


def vertex_client_settings(cloud: CloudConfig) -> dict:
    """The API host and CMEK key the components' Vertex clients use (components/vertex_clients.py)."""
    return {API_ENDPOINT: api_endpoint(cloud), ENCRYPTION_KEY: cloud.encryption_key}


def vertex_serving_config(cloud: CloudConfig) -> dict:
    """The keys TFX's Vertex Pusher reads: a TF Serving prebuilt container behind an endpoint.

    Everything in serving args but the endpoint and project goes to `aiplatform.Model.deploy` as is;
    KEEP_PREVIOUS_KEY is read by components/pusher/executor.py after the push, VERTEX_CLIENT_KEY before it
    (the CMEK key goes there: aiplatform applies it to the uploaded Model and a created Endpoint).
    """
    from tfx.extensions.google_cloud_ai_platform import constants as vertex_constants

    from components.pusher.endpoint import KEEP_PREVIOUS_KEY

    serving_args = {
        "project_id": cloud.project,
        "endpoint_name": cloud.endpoint_name,
        "machine_type": cloud.endpoint_machine_type,
        "min_replica_count": cloud.endpoint_min_replicas,
        "max_replica_count": cloud.endpoint_max_replicas or cloud.endpoint_min_replicas,
        "traffic_percentage": cloud.endpoint_traffic_percentage,
    }
    if cloud.endpoint_accelerator:
        serving_args["accelerator_type"] = ACCELERATORS[cloud.endpoint_accelerator].accelerator_type
        serving_args["accelerator_count"] = fixed_gpu_count(cloud.endpoint_machine_type) or 1
    if cloud.serving_service_account:
        serving_args["service_account"] = cloud.serving_service_account
    return {
        KEEP_PREVIOUS_KEY: cloud.endpoint_keep_previous,
        VERTEX_CLIENT_KEY: vertex_client_settings(cloud),
        vertex_constants.ENABLE_VERTEX_KEY: True,
        vertex_constants.VERTEX_REGION_KEY: cloud.region,
        vertex_constants.VERTEX_CONTAINER_IMAGE_URI_KEY: serving_image(cloud),
        vertex_constants.SERVING_ARGS_KEY: serving_args,
    }


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


def beam_args(config: PipelineConfig) -> list[str]:
    """Beam arguments of the cloud components (ExampleGen, StatisticsGen, Transform, Evaluator).

    Dataflow workers run the dataflow image (`sdk_container_image`: the pipeline's packages under Beam's boot
    program; `sdk_location=container` so no SDK tarball is staged over it) on Runner v2, the only runner that
    takes a custom container.
    """
    cloud = config.cloud
    if cloud.beam_runner == "DirectRunner":
        return list(MULTI_PROCESSING_BEAM_ARGS)
    beam_root = cloud.pipeline_root.rstrip("/")
    return [
        "--runner=DataflowRunner",
        f"--project={cloud.project}",
        f"--region={cloud.region}",
        f"--temp_location={beam_root}/beam-tmp",
        f"--staging_location={beam_root}/beam-staging",
        "--experiments=use_runner_v2",
        "--sdk_location=container",
        f"--machine_type={cloud.dataflow_machine_type}",
        f"--max_num_workers={cloud.dataflow_max_workers}",
        f"--sdk_container_image={cloud.dataflow_image_uri}",
        *([f"--service_account_email={cloud.service_account}"] if cloud.service_account else []),
        *([f"--dataflow_kms_key={cloud.encryption_key}"] if cloud.encryption_key else []),
        *([f"--subnetwork={cloud.dataflow_subnetwork}"] if cloud.dataflow_subnetwork else []),
    ]
