"""`tuning` compiled for the cloud: on Vertex AI, TFX's Vertex Tuner extension launches one CustomJob whose workers
run the trials `tuning.parallel_trials` at a time (the request built by TFX's own launcher inside ours, received
by the fake Vertex API as the API's proto); on Kubeflow the Tuner trains in its pod, on the trainer image. Either
way the Trainer takes the Tuner's best_hyperparameters."""

import json

import pytest
from google.auth.credentials import AnonymousCredentials

from pipeline.cloud.kubeflow_v2_runner import compile_spec
from tests.cloud_specs import KMS_KEY, ROOT, at_api

TUNING = {"trials": 6, "parallel_trials": 3, "search": {"learning_rate": {"min": 1e-5, "max": 1e-4}}}


def _tuned(config):
    return config.model_copy(update={"tuning": config.tuning.model_validate(TUNING)})


def _parameters(spec, task):
    """The task's constant parameters, JSON ones parsed (custom_config, tune_args)."""
    parameters = spec["root"]["dag"]["tasks"][task]["inputs"]["parameters"]
    constants = {k: v["runtimeValue"]["constant"] for k, v in parameters.items() if "runtimeValue" in v}
    return {k: json.loads(v) if isinstance(v, str) and v.startswith("{") else v for k, v in constants.items()}


def test_the_trainer_takes_the_tuners_best_hyperparameters(profile):
    spec = compile_spec(_tuned(profile))
    trainer_inputs = spec["root"]["dag"]["tasks"]["Trainer"]["inputs"]["artifacts"]
    assert trainer_inputs["hyperparameters"]["taskOutputArtifact"] == {
        "outputArtifactKey": "best_hyperparameters",
        "producerTask": "Tuner",
    }
    tuner = _parameters(spec, "Tuner")
    assert tuner["tuner_fn"] == "components.tuner.module.tuner_fn"
    assert tuner["tune_args"] == {"num_parallel_trials": 3}
    assert tuner["custom_config"]["tuning"]["trials"] == 6
    assert "Tuner" not in compile_spec(profile)["root"]["dag"]["tasks"]  # off by default


def test_the_vertex_tuner_launches_one_custom_job_with_a_worker_per_parallel_trial(profile, vertex_api, monkeypatch):
    import google.auth

    from components.tuner.executor import VertexTunerExecutor

    fake, address = vertex_api
    tuner = _parameters(compile_spec(at_api(_tuned(profile), address, encryption_key=KMS_KEY)), "Tuner")
    properties = {k: json.dumps(v) if isinstance(v, dict) else v for k, v in tuner.items()}
    # The one stand-in: the launcher's credentials (its VM's, in the cloud).
    monkeypatch.setattr(google.auth, "default", lambda **_: (AnonymousCredentials(), "my-gcp-project"))
    VertexTunerExecutor().Do({}, {}, properties)

    (created,) = [r for r in fake.received if r.method == "JobService/CreateCustomJob"]
    request = created.request
    assert request.parent == "projects/my-gcp-project/locations/us-central1"
    job = request.custom_job
    chief, workers = job.job_spec.worker_pool_specs
    assert (chief.replica_count, workers.replica_count) == (1, 2)  # 3 trials at once: the chief and 2 workers
    for pool in (chief, workers):
        assert pool.machine_spec.machine_type == "n1-standard-8"
        assert pool.container_spec.image_uri == profile.cloud.image_uri
        command = list(pool.container_spec.command)
        executor = command[command.index("--executor_class_path") + 1]
        assert executor == "tfx.extensions.google_cloud_ai_platform.tuner.executor._WorkerExecutor"
    assert job.job_spec.service_account == profile.cloud.service_account
    assert job.encryption_spec.kms_key_name == KMS_KEY
    assert {k: job.labels[k] for k in profile.cloud.labels} == dict(profile.cloud.labels)
    assert fake.requests("JobService/GetCustomJob")[0].name == fake.custom_jobs[0].name


def test_on_kubeflow_the_tuner_trains_in_its_pod_on_the_trainer_image():
    from pipeline.cloud.vertex_jobs import trainer_image
    from pipeline.config import pipeline_config

    kubeflow = _tuned(pipeline_config.load_config(ROOT / "configs/kubeflow.yaml"))
    spec = compile_spec(kubeflow)
    executors = spec["deploymentSpec"]["executors"]
    (tuner,) = [e for name, e in executors.items() if "Tuner" in name]
    assert tuner["container"]["image"] == trainer_image(kubeflow.cloud)
    assert "tfx.components.tuner.executor.Executor" in json.dumps(tuner["container"])
    with pytest.raises(KeyError):
        _parameters(spec, "Tuner")["tune_args"]  # TFX's local Tuner executor refuses TuneArgs


def test_tuning_trials_train_on_one_on_demand_machine_each_whatever_the_trainer_uses(profile):
    """The Trainer's workers and spot capacity are its own: TFX's Vertex Tuner copies the first pool for its
    parallel trials, each trial a whole training on one machine."""
    from pipeline.cloud.vertex_jobs import vertex_tuning_config

    cloud = profile.cloud.model_copy(update={"trainer_workers": 3, "trainer_spot": True})
    job = next(v for v in vertex_tuning_config(cloud).values() if isinstance(v, dict) and "job_spec" in v)
    (pool,) = job["job_spec"]["worker_pool_specs"]
    assert pool["replica_count"] == 1 and "scheduling" not in job["job_spec"]
