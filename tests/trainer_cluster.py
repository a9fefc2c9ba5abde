"""The Trainer's Vertex AI CustomJob, its replicas run here as Vertex AI runs them.

Each replica runs the container command TFX's Vertex training client puts in the job (`python -m
tfx.scripts.run_executor` with the inputs, outputs and exec properties as JSON), with the TF_CONFIG and
CLUSTER_SPEC Vertex AI sets on it: "chief" for the first pool's replica, "worker" 0, 1, ... for the second
pool's (cloud.google.com/vertex-ai/docs/training/distributed-training). Hosts are localhost ports here.
The inputs are a finished local run's: the Trainer's input artifacts and exec properties from its ML Metadata.
"""

from __future__ import annotations

import copy
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from ml_metadata import metadata_store
from ml_metadata.proto import metadata_store_pb2
from tfx.types import artifact_utils, standard_artifacts

TRAINER_EXECUTOR = "components.trainer.executor.Executor"


def recorded_trainer_inputs(sqlite: Path) -> tuple[dict[str, list], dict[str, Any]]:
    """(input_dict, exec_properties) of the Trainer execution a local run recorded in ML Metadata."""
    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = str(sqlite)
    store = metadata_store.MetadataStore(config)
    trainer_type = next(t for t in store.get_execution_types() if t.name.endswith(".HFTrainer"))
    (execution,) = store.get_executions_by_type(trainer_type.name)
    events = [
        e
        for e in store.get_events_by_execution_ids([execution.id])
        if e.type == metadata_store_pb2.Event.INPUT and e.path.steps
    ]
    artifacts = {a.id: a for a in store.get_artifacts_by_id([e.artifact_id for e in events])}
    types = {t.id: t for t in store.get_artifact_types_by_id([a.type_id for a in artifacts.values()])}
    inputs: dict[str, list] = {}
    for event in events:
        artifact = artifacts[event.artifact_id]
        inputs.setdefault(event.path.steps[0].key, []).append(
            artifact_utils.deserialize_artifact(types[artifact.type_id], artifact)
        )
    properties = {key: value.string_value for key, value in execution.custom_properties.items()}
    return inputs, properties


def new_outputs(root: Path, execution_id: int = 7) -> dict[str, list]:
    """Fresh `model` and `model_run` artifacts of a new Trainer execution, laid out as TFX lays them out under a
    pipeline root (<root>/Trainer/<output>/<execution id>): checkpoints go beside them, in <root>/Trainer/.resume."""
    model, model_run = standard_artifacts.Model(), standard_artifacts.ModelRun()
    model.uri = str(root / "Trainer" / "model" / str(execution_id))
    model_run.uri = str(root / "Trainer" / "model_run" / str(execution_id))
    return {"model": [model], "model_run": [model_run]}


def with_training(properties: dict[str, Any], **training) -> dict[str, Any]:
    """Exec properties whose custom_config trains with these training.* values."""
    custom_config = json.loads(properties["custom_config"])
    custom_config["training"].update(training)
    return {**properties, "custom_config": json.dumps(custom_config)}


def custom_job(job_args: dict, inputs: dict, outputs: dict, properties: dict) -> dict:
    """The CustomJob TFX's Vertex training client builds from the Trainer's job settings
    (pipeline/cloud/profile.py: vertex_training_config) and this execution's artifacts."""
    from tfx.extensions.google_cloud_ai_platform import training_clients

    client = training_clients.VertexJobClient.__new__(training_clients.VertexJobClient)  # no GAPIC client
    client._region = "us-central1"
    args = copy.deepcopy(job_args)
    args.pop("project", None)
    return client.create_training_job(inputs, outputs, properties, TRAINER_EXECUTOR, args, None, None)


def trainer_custom_job(recorded: tuple[dict, dict], root: Path, workers: int, **training) -> dict:
    """The CustomJob a Vertex profile with `workers` workers gives the Trainer (vertex_training_config), for the
    `recorded` (inputs, exec properties) trained with these training.* values, its outputs new under `root`."""
    from pipeline.cloud.vertex_jobs import vertex_training_config
    from pipeline.config.cloud import CloudConfig

    inputs, properties = recorded
    cloud = CloudConfig(
        project="my-gcp-project", image_uri="us-docker.pkg.dev/p/hftfx/pipeline:1", trainer_workers=workers
    )
    job_args = vertex_training_config(cloud)["ai_platform_training_args"]
    return custom_job(job_args, inputs, new_outputs(root), with_training(properties, **training))


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def replica_environments(pools: list[dict]) -> list[dict[str, str]]:
    """TF_CONFIG and CLUSTER_SPEC for every replica of `pools`, as Vertex AI sets them (task types chief and
    worker; workerpool0 and workerpool1)."""
    counts = [int(pool.get("replica_count", 1)) for pool in pools]
    ports = iter(free_ports(sum(counts)))
    hosts = [[f"localhost:{next(ports)}" for _ in range(count)] for count in counts]
    tf_cluster = {"chief": hosts[0], **({"worker": hosts[1]} if len(hosts) > 1 else {})}
    pools_cluster = {f"workerpool{i}": pool_hosts for i, pool_hosts in enumerate(hosts)}
    environments = []
    for pool_index, count in enumerate(counts):
        task_type = "chief" if pool_index == 0 else "worker"
        for index in range(count):
            environments.append(
                {
                    "TF_CONFIG": json.dumps(
                        {"cluster": tf_cluster, "task": {"type": task_type, "index": index}, "environment": "cloud"}
                    ),
                    "CLUSTER_SPEC": json.dumps(
                        {
                            "cluster": pools_cluster,
                            "task": {"type": f"workerpool{pool_index}", "index": index},
                            "environment": "cloud",
                        }
                    ),
                }
            )
    return environments


def start_replicas(job: dict, log_dir: Path) -> list[subprocess.Popen]:
    """Every replica of the job's pools, each running its pool's container command (`python` is this
    interpreter, as in the image), output to log_dir/replica-<n>.log."""
    pools = job["job_spec"]["worker_pool_specs"]
    commands = [pool["container_spec"]["command"] for pool in pools for _ in range(int(pool.get("replica_count", 1)))]
    log_dir.mkdir(parents=True, exist_ok=True)
    replicas = []
    for n, (command, cluster_env) in enumerate(zip(commands, replica_environments(pools), strict=True)):
        assert command[0] == "python"
        log = open(log_dir / f"replica-{n}.log", "a")  # noqa: SIM115 - closed with the process
        env = {**os.environ, **cluster_env}
        replicas.append(
            subprocess.Popen([sys.executable, *command[1:]], env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
        )
    return replicas
