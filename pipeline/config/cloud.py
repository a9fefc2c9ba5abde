"""The `cloud` config section: where a compiled pipeline runs on Google Cloud (Vertex AI Pipelines, or Kubeflow
reading the same spec). Checked as a whole by pipeline/cloud/profile.py's validate_cloud before compiling.

In pipeline/config/ rather than in cloud/: every module of cloud/ reads the composed PipelineConfig.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from models.config_section import ConfigSection


class CloudConfig(ConfigSection):
    """Where a compiled pipeline runs on Google Cloud (Vertex AI Pipelines, or Kubeflow reading the same spec)."""

    orchestrator: Literal["vertex", "kubeflow"] = Field(
        "vertex",
        description="vertex: Vertex AI Pipelines (Trainer in a Vertex CustomJob, endpoint push, no-regression "
        "gate); kubeflow: Kubeflow Pipelines 2, every component in its pod, no Vertex call, blessing by the "
        "absolute bounds only (its v2 backend runs no resolver nodes)",
    )
    project: str = Field("", description="the Google Cloud project id")
    region: str = Field("us-central1", description="the region of the pipeline job and the Vertex resources")
    api_endpoint: str = Field(
        "",
        description="the Vertex AI API host[:port], e.g. a Private Service Connect endpoint; empty: "
        "<region>-aiplatform.googleapis.com",
    )
    pipeline_root: str = Field("", description="gs://bucket/path: artifacts of every run")
    image_uri: str = Field("", description="the pushed image every component runs in (see Dockerfile)")
    trainer_image_uri: str = Field("", description="the Trainer's image; empty: image_uri (a TPU needs libtpu)")
    service_account: str = Field("", description="the identity the pipeline job runs as")
    network: str = Field("", description="projects/<number>/global/networks/<name> for VPC peering")
    encryption_key: str = Field("", description="Cloud KMS key name (CMEK) for the pipeline job")
    labels: dict[str, str] = Field(default_factory=dict, description="labels of the pipeline job and its resources")
    enable_caching: bool = Field(True, description="Vertex reuses a component's outputs when its inputs are unchanged")
    experiment: str = Field(
        "",
        description="a Vertex AI Experiment (created when missing) that runs sent by hftfx submit join; trigger, "
        "event and scheduled runs are found by their labels",
    )
    beam_runner: Literal["DirectRunner", "DataflowRunner"] = Field(
        "DirectRunner",
        description="the data components' Beam: DirectRunner inside the component (a worker per core), or "
        "DataflowRunner, whose workers run dataflow_image_uri",
    )
    dataflow_image_uri: str = Field(
        "", description="the Dockerfile's dataflow target (Beam's boot program as entrypoint), pushed"
    )
    dataflow_machine_type: str = Field("n1-standard-4", description="Dataflow workers' machine type")
    dataflow_max_workers: int = Field(10, description="the most Dataflow workers a component's job scales to")
    dataflow_subnetwork: str = Field(
        "", description="Dataflow workers' subnetwork (regions/<region>/subnetworks/<name>); needed with network"
    )
    trainer_accelerator: str = Field(
        "cpu",
        description="the Trainer's placement: cpu, a GPU (t4, l4, v100, a100, a100-80gb, h100) or a TPU VM "
        "(tpu-v5e-1, tpu-v5e-4, tpu-v5e-8); see pipeline/cloud/profile.py",
    )
    trainer_accelerator_count: int = Field(0, description="GPUs per worker; 0: the catalogue's default")
    trainer_machine_type: str = Field("", description="overrides the catalogue's machine type for the accelerator")
    trainer_workers: int = Field(
        1,
        ge=1,
        description="machines that train one model together: the chief and trainer_workers - 1 identical workers, "
        "in lock-step under MultiWorkerMirroredStrategy (NCCL between GPUs, a ring between CPUs); each machine "
        "takes training.batch_size per replica, so the global batch grows with them; Vertex AI restarts them "
        "all from the last checkpoint when one fails",
    )
    trainer_spot: bool = Field(
        False,
        description="train on Spot VMs (a fraction of the on-demand price; Google Cloud may take them back at "
        "any time): a preempted job restarts and resumes from the last checkpoint, so a preemption costs at most "
        "training.checkpoint_every_steps steps; the run summary says how many times it resumed",
    )
    push_to: Literal["filesystem", "endpoint"] = Field(
        "filesystem",
        description="filesystem: TF Serving layout under serving_dir (gs:// in the cloud); endpoint: a Vertex "
        "AI endpoint",
    )
    endpoint_name: str = Field("", description="the Vertex endpoint's display name (created when missing)")
    endpoint_machine_type: str = Field("n1-standard-4", description="the endpoint replicas' machine type")
    endpoint_min_replicas: int = Field(1, description="replicas the endpoint keeps for the pushed model at least")
    endpoint_max_replicas: int = Field(
        0, description="replicas Vertex may scale the pushed model up to under load; 0: endpoint_min_replicas"
    )
    endpoint_accelerator: str = Field(
        "", description="a GPU per replica (t4, l4, v100, a100, ...: the trainer's names); empty: CPU only"
    )
    endpoint_traffic_percentage: int = Field(
        100,
        description="the share of the endpoint's traffic the pushed model takes; under 100 a canary: the models "
        "already serving keep the rest (in their proportions) until `hftfx promote` gives the newest 100%",
    )
    endpoint_keep_previous: int = Field(
        0,
        description="models deployed before the pushed one that stay on the endpoint at 0% traffic for a quick "
        "rollback; older ones are undeployed after each push",
    )
    endpoint_log_sample: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="the share of the endpoint's requests and answers Vertex logs to BigQuery (request-response "
        "logging, what `hftfx monitor --bigquery` reads); 0: off",
    )
    endpoint_log_table: str = Field(
        "",
        description="bq://project.dataset.table the endpoint logs to; empty: the table Vertex names "
        "(bq://<project>.logging_<endpoint>_<id>.request_response_logging)",
    )
    notify_topic: str = Field(
        "",
        description="a Pub/Sub topic (projects/<project>/topics/<name>, or a name in cloud.project) that gets "
        "each run's outcome from an exit step: succeeded, not_blessed, failed or cancelled, with the reason and "
        "the run's link; empty: no message",
    )
    serving_service_account: str = Field(
        "", description="the identity the endpoint's replicas run as; empty: Vertex's service agent"
    )
    serving_image_uri: str = Field(
        "",
        description="the endpoint's serving container; empty: image_uri, whose default command (hftfx serve) "
        "serves with the training TensorFlow (models/serving/prediction_server.py says why)",
    )
