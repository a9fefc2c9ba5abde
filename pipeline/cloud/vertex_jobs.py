"""The Vertex AI settings a profile compiles into: the Trainer's and Tuner's CustomJob (worker pools, images,
scheduling, spot capacity), the endpoint push, the API host, the Beam arguments of the data components."""

from __future__ import annotations

import copy

from components.vertex_clients import API_ENDPOINT, ENCRYPTION_KEY, VERTEX_CLIENT_KEY
from models.hub.hub_token import TOKEN_SECRET_ENV
from pipeline.cloud.machines import ACCELERATORS, accelerator, fixed_gpu_count
from pipeline.config.cloud import CloudConfig
from pipeline.config.pipeline_config import MULTI_PROCESSING_BEAM_ARGS, PipelineConfig


def on_vertex(cloud: CloudConfig) -> bool:
    """Vertex AI Pipelines runs the spec: the Trainer goes to a CustomJob, the baseline resolver runs."""
    return cloud.orchestrator == "vertex"


def api_endpoint(cloud: CloudConfig) -> str:
    """The Vertex AI API host the submission, trigger and schedule clients talk to."""
    return cloud.api_endpoint or f"{cloud.region}-aiplatform.googleapis.com"


def service_client(cloud: CloudConfig, client_class, credentials):
    """A Vertex AI service client (aiplatform_v1's PipelineServiceClient, EndpointServiceClient, ...) for the
    profile's API host."""
    return client_class(credentials=credentials, client_options={"api_endpoint": api_endpoint(cloud)})


def notify_topic_path(cloud: CloudConfig) -> str:
    """projects/<project>/topics/<name> of cloud.notify_topic ("" when there is none)."""
    topic = cloud.notify_topic
    return topic if not topic or topic.startswith("projects/") else f"projects/{cloud.project}/topics/{topic}"


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
    KEEP_PREVIOUS_KEY and REQUEST_LOGGING_KEY are read by components/pusher/executor.py after the push,
    VERTEX_CLIENT_KEY before it
    (the CMEK key goes there: aiplatform applies it to the uploaded Model and a created Endpoint).
    """
    from tfx.extensions.google_cloud_ai_platform import constants as vertex_constants

    from components.pusher.endpoint import KEEP_PREVIOUS_KEY, REQUEST_LOGGING_KEY

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
    logging = {"sampling_rate": cloud.endpoint_log_sample, "bigquery_table": cloud.endpoint_log_table}
    return {
        KEEP_PREVIOUS_KEY: cloud.endpoint_keep_previous,
        **({REQUEST_LOGGING_KEY: logging} if cloud.endpoint_log_sample else {}),
        VERTEX_CLIENT_KEY: vertex_client_settings(cloud),
        vertex_constants.ENABLE_VERTEX_KEY: True,
        vertex_constants.VERTEX_REGION_KEY: cloud.region,
        vertex_constants.VERTEX_CONTAINER_IMAGE_URI_KEY: serving_image(cloud),
        vertex_constants.SERVING_ARGS_KEY: serving_args,
    }


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
