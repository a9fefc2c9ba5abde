"""The Trainer's Vertex CustomJob: the launcher's request as the API takes it, worker pools, CMEK, network."""

import json

import pytest
from google.auth.credentials import AnonymousCredentials

from pipeline.cloud.kubeflow_v2_runner import compile_spec
from pipeline.config import pipeline_config
from tests.cloud_specs import (
    KMS_KEY,
    ROOT,
    TPU_IMAGE_VARIABLES,
    at_api,
    custom_job_request,
    executor_of,
    trainer_job,
)


@pytest.mark.parametrize("accelerator", ["tpu-v5e-4", "l4"])
def test_the_trainer_launcher_runs_the_pipeline_image_and_only_the_worker_pool_the_accelerator_image(
    profile, accelerator
):
    worker_image = f"us-central1-docker.pkg.dev/p/hftfx/pipeline-{accelerator}:0.1.0"
    cloud = profile.cloud.model_copy(update={"trainer_accelerator": accelerator, "trainer_image_uri": worker_image})
    spec = compile_spec(profile.model_copy(update={"cloud": cloud}))
    launcher = executor_of(spec, "Trainer")["container"]
    assert launcher["image"] == profile.cloud.image_uri
    assert launcher["args"][1] == "components.trainer.executor.VertexExecutor"  # it creates and polls the CustomJob
    assert not {e.get("name") for e in launcher.get("env", [])} & set(TPU_IMAGE_VARIABLES)
    assert not set(json.dumps(launcher).split('"')) & set(TPU_IMAGE_VARIABLES)
    (pool,) = custom_job_request(spec).custom_job.job_spec.worker_pool_specs
    assert pool.container_spec.image_uri == worker_image
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert all(variable in dockerfile for variable in TPU_IMAGE_VARIABLES[:2])  # the names above are the real ones


def test_on_kubeflow_the_trainer_pod_trains_so_it_runs_the_trainer_image():
    kubeflow = pipeline_config.load_config(ROOT / "configs/kubeflow.yaml")
    image = "us-central1-docker.pkg.dev/p/hftfx/pipeline-gpu:0.1.0"
    spec = compile_spec(
        kubeflow.model_copy(update={"cloud": kubeflow.cloud.model_copy(update={"trainer_image_uri": image})})
    )
    assert executor_of(spec, "Trainer")["container"]["image"] == image
    assert executor_of(spec, "Transform")["container"]["image"] == kubeflow.cloud.image_uri


def test_trainer_runs_in_a_vertex_custom_job(committed, profile):
    assert trainer_job(committed)["ai_platform_enable_vertex"] is True
    request = custom_job_request(committed)
    assert request.parent == "projects/my-gcp-project/locations/us-central1"
    job = request.custom_job
    (pool,) = job.job_spec.worker_pool_specs
    assert pool.machine_spec.machine_type == "n1-standard-8"  # the profile's placement: cpu
    assert pool.container_spec.image_uri == profile.cloud.image_uri
    command = list(pool.container_spec.command)
    assert command[command.index("--executor_class_path") + 1] == "components.trainer.executor.Executor"
    assert job.job_spec.service_account == profile.cloud.service_account
    assert {k: job.labels[k] for k in profile.cloud.labels} == dict(profile.cloud.labels)
    assert trainer_job(committed)["training"]["precision"] == "auto"


def test_cmek_and_network_land_where_the_custom_job_api_has_them(profile):
    cloud = profile.cloud.model_copy(
        update={
            "encryption_key": "projects/p/locations/us-central1/keyRings/r/cryptoKeys/k",
            "network": "projects/123/global/networks/vpc",
            "dataflow_subnetwork": "regions/us-central1/subnetworks/hftfx",
        }
    )
    job = custom_job_request(compile_spec(profile.model_copy(update={"cloud": cloud}))).custom_job
    assert job.encryption_spec.kms_key_name == cloud.encryption_key
    assert job.job_spec.network == cloud.network


@pytest.mark.parametrize(
    ("accelerator", "count", "machine_spec"),
    [
        ("l4", 0, {"machine_type": "g2-standard-8", "accelerator_type": "NVIDIA_L4", "accelerator_count": 1}),
        ("a100", 2, {"machine_type": "a2-highgpu-2g", "accelerator_type": "NVIDIA_TESLA_A100", "accelerator_count": 2}),
        ("l4", 4, {"machine_type": "g2-standard-48", "accelerator_type": "NVIDIA_L4", "accelerator_count": 4}),
        ("t4", 2, {"machine_type": "n1-standard-16", "accelerator_type": "NVIDIA_TESLA_T4", "accelerator_count": 2}),
        ("h100", 0, {"machine_type": "a3-highgpu-8g", "accelerator_type": "NVIDIA_H100_80GB", "accelerator_count": 8}),
        ("cpu", 0, {"machine_type": "n1-standard-8"}),
        ("tpu-v5e-8", 0, {"machine_type": "ct5lp-hightpu-8t", "tpu_topology": "2x4"}),
    ],
)
def test_gpu_and_other_placements_give_their_worker_pool(profile, accelerator, count, machine_spec):
    image = "" if accelerator == "cpu" else "us-central1-docker.pkg.dev/p/hftfx/pipeline-accelerated:0.1.0"
    cloud = profile.cloud.model_copy(
        update={"trainer_accelerator": accelerator, "trainer_accelerator_count": count, "trainer_image_uri": image}
    )
    spec = compile_spec(profile.model_copy(update={"cloud": cloud}))
    (pool,) = custom_job_request(spec).custom_job.job_spec.worker_pool_specs
    as_dict = type(pool.machine_spec).to_dict(
        pool.machine_spec, including_default_value_fields=False, use_integers_for_enums=False
    )
    assert as_dict == machine_spec
    assert pool.container_spec.image_uri == (image or profile.cloud.image_uri)


def test_the_trainer_launcher_creates_and_polls_its_custom_job_at_the_profiles_api_host(
    profile, vertex_api, monkeypatch
):
    """TFX's own launch (`runner.start_cloud_training`: VertexJobClient, create, poll) inside our executor's
    `job_client_at`."""
    import copy

    import google.auth
    from tfx.extensions.google_cloud_ai_platform import runner, training_clients

    from components.vertex_clients import VERTEX_CLIENT_KEY, job_client_at

    fake, address = vertex_api
    trainer = trainer_job(compile_spec(at_api(profile, address, encryption_key=KMS_KEY)))
    assert trainer[VERTEX_CLIENT_KEY]["api_endpoint"] == address
    factory = training_clients.get_job_client
    # The one stand-in: credentials (the launcher's come from its VM; google.auth reads the metadata host at
    # import, so this process cannot be pointed at a fake metadata server: the event function's test does that).
    monkeypatch.setattr(google.auth, "default", lambda **_: (AnonymousCredentials(), "my-gcp-project"))
    with job_client_at(trainer[VERTEX_CLIENT_KEY]):
        runner.start_cloud_training(
            {}, {}, {}, "components.trainer.executor.Executor", copy.deepcopy(trainer["ai_platform_training_args"]),
            None, enable_vertex=True, vertex_region=trainer["ai_platform_vertex_region"],
        )  # fmt: skip
    assert training_clients.get_job_client is factory  # restored
    (created,) = [r for r in fake.received if r.method == "JobService/CreateCustomJob"]
    assert created.request.parent == "projects/my-gcp-project/locations/us-central1"
    assert created.request.custom_job.encryption_spec.kms_key_name == KMS_KEY
    assert fake.requests("JobService/GetCustomJob")[0].name == fake.custom_jobs[0].name


@pytest.mark.parametrize("spot", [False, True])
def test_several_workers_and_spot_capacity_reach_the_custom_job_as_the_api_takes_them(profile, spot):
    """A chief pool of one and a pool of the other workers on the same machine (Vertex AI sets TF_CONFIG "chief"
    and "worker" on them); Spot VMs by the scheduling strategy; a restart of the whole job when a replica
    restarts, so the workers resume together from the checkpoint."""
    from google.cloud import aiplatform_v1

    cloud = profile.cloud.model_copy(
        update={
            "trainer_workers": 4,
            "trainer_spot": spot,
            "trainer_accelerator": "l4",
            "trainer_accelerator_count": 2,
            "trainer_image_uri": "us-central1-docker.pkg.dev/p/hftfx/pipeline-gpu:0.1.0",
        }
    )
    job = custom_job_request(compile_spec(profile.model_copy(update={"cloud": cloud}))).custom_job
    chief, workers = job.job_spec.worker_pool_specs
    assert (chief.replica_count, workers.replica_count) == (1, 3)
    for pool in (chief, workers):
        assert (pool.machine_spec.machine_type, pool.machine_spec.accelerator_count) == ("g2-standard-24", 2)
        assert pool.container_spec.image_uri == cloud.trainer_image_uri
        command = list(pool.container_spec.command)
        assert command[command.index("--executor_class_path") + 1] == "components.trainer.executor.Executor"
    scheduling = job.job_spec.scheduling
    assert scheduling.restart_job_on_worker_restart is True
    expected = (
        aiplatform_v1.Scheduling.Strategy.SPOT if spot else aiplatform_v1.Scheduling.Strategy.STRATEGY_UNSPECIFIED
    )
    assert scheduling.strategy == expected


def test_one_on_demand_machine_sends_no_scheduling_and_spot_alone_restarts_the_job(profile):
    from google.cloud import aiplatform_v1

    alone = custom_job_request(compile_spec(profile)).custom_job.job_spec
    assert len(alone.worker_pool_specs) == 1 and "scheduling" not in alone
    assert "scheduling" not in trainer_job(compile_spec(profile))["ai_platform_training_args"]["job_spec"]
    spot = profile.model_copy(update={"cloud": profile.cloud.model_copy(update={"trainer_spot": True})})
    job = custom_job_request(compile_spec(spot)).custom_job
    assert len(job.job_spec.worker_pool_specs) == 1
    assert job.job_spec.scheduling.strategy == aiplatform_v1.Scheduling.Strategy.SPOT
    assert job.job_spec.scheduling.restart_job_on_worker_restart is True
