"""Submitting a compiled spec: Vertex PipelineJobs and Kubeflow runs as their APIs receive them."""

import json

import pytest
from google.auth.credentials import AnonymousCredentials
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from components import run_parameters
from pipeline.cloud import submit
from pipeline.cloud.compiled_specs import KUBEFLOW_PIPELINE_YAML, PIPELINE_YAML
from pipeline.config import pipeline_config
from pipeline.config.pipeline_config import ConfigError
from tests import fake_kfp
from tests.cloud_specs import (
    PROFILE,
    ROOT,
    compiled,
)


def test_submitted_pipeline_job_arrives_as_the_dry_run_shows_it(profile, vertex_api, tmp_path):
    """`aiplatform.PipelineJob.submit` sends the CreatePipelineJobRequest; the fake parses it off the wire."""
    fake, address = vertex_api
    cloud = profile.cloud.model_copy(
        update={
            "api_endpoint": address,
            "network": "projects/123/global/networks/ml",
            "dataflow_subnetwork": "regions/us-central1/subnetworks/ml",
            "encryption_key": "projects/p/locations/us/keyRings/r/cryptoKeys/k",
        }
    )
    config = profile.model_copy(update={"cloud": cloud})
    values = run_parameters.values(config, {"epochs": 5, "span": 3})
    job = submit.build_pipeline_job(config, compiled(config, tmp_path), values, AnonymousCredentials())
    dry_run = submit.job_request(job, config)
    name = submit.submit_to_vertex(job, config)

    (request,) = fake.requests("PipelineService/CreatePipelineJob")
    assert submit.request_json(request) == dry_run
    assert {path.split("?")[0] for path in fake.storage_paths} == {
        "/storage/v1/b/my-hftfx-bucket"
    }  # exists, not created
    assert name == f"{request.parent}/pipelineJobs/{request.pipeline_job_id}"
    assert request.parent == "projects/my-gcp-project/locations/us-central1"
    assert request.pipeline_job_id.startswith("hf-text-classifier-")
    sent = request.pipeline_job
    assert sent.display_name == "hf-text-classifier"
    assert sent.runtime_config.gcs_output_directory == "gs://my-hftfx-bucket/pipeline-root"
    assert dict(sent.runtime_config.parameter_values) == {
        "span": 3,
        "dataset_revision": "",
        "epochs": "5",
    }  # learning_rate is auto in the config: left out, the compiled default (auto: the Trainer chooses) applies
    assert dict(sent.labels) == {"team": "ml-platform", "app": "hf-text-classifier"}
    assert sent.service_account == "hftfx-runner@my-gcp-project.iam.gserviceaccount.com"
    assert sent.network == "projects/123/global/networks/ml"
    assert sent.encryption_spec.kms_key_name == cloud.encryption_key
    spec = json_format.ParseDict(
        json_format.MessageToDict(sent._pb.pipeline_spec), pipeline_spec_pb2.PipelineSpec(), ignore_unknown_fields=False
    )
    assert spec.pipeline_info.name == "hf-text-classifier"
    assert all(task.caching_options.enable_cache for task in spec.root.dag.tasks.values())


def test_a_submitted_run_joins_its_vertex_experiment(profile, vertex_api, tmp_path):
    """cloud.experiment: aiplatform creates the Experiment (a system.Experiment context of the default metadata
    store) when missing and adds the run's system.PipelineRun context to it; a second run reuses it."""
    fake, address = vertex_api
    cloud = profile.cloud.model_copy(update={"api_endpoint": address, "experiment": "hf-text-classifier-tuning"})
    config = profile.model_copy(update={"cloud": cloud})
    names = []
    for epochs in (2, 3):
        values = run_parameters.values(config, {"epochs": epochs})
        job = submit.build_pipeline_job(
            config, compiled(config, tmp_path), values, AnonymousCredentials(), job_id=f"tuning-epochs-{epochs}"
        )
        names.append(submit.submit_to_vertex(job, config))

    store = "projects/my-gcp-project/locations/us-central1/metadataStores/default"
    (created,) = fake.requests("MetadataService/CreateContext")
    assert created.parent == store and created.context_id == "hf-text-classifier-tuning"
    assert created.context.schema_title == "system.Experiment"
    links = fake.requests("MetadataService/AddContextChildren")
    assert [link.context for link in links] == [f"{store}/contexts/hf-text-classifier-tuning"] * 2
    runs = {job.name: job.job_detail.pipeline_run_context.name for job in fake.jobs}
    assert [list(link.child_contexts) for link in links] == [[runs[name]] for name in names]


def test_a_second_submission_of_one_job_id_is_refused_by_the_service(profile, vertex_api, tmp_path):
    from google.api_core.exceptions import AlreadyExists

    fake, address = vertex_api
    config = profile.model_copy(update={"cloud": profile.cloud.model_copy(update={"api_endpoint": address})})
    values = run_parameters.values(config)
    for attempt in range(2):
        job = submit.build_pipeline_job(
            config, compiled(config, tmp_path), values, AnonymousCredentials(), job_id="run-1"
        )
        if attempt == 0:
            submit.submit_to_vertex(job, config)
        else:
            with pytest.raises(AlreadyExists):
                submit.submit_to_vertex(job, config)
    assert len(fake.jobs) == 1


def test_unknown_runtime_parameter_is_refused(profile):
    with pytest.raises(pipeline_config.ConfigError, match="unknown pipeline parameter"):
        run_parameters.values(profile, {"epoch": 2})


def test_missing_credentials_say_how_to_log_in(monkeypatch):
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    def no_credentials(**_):
        raise DefaultCredentialsError("none")

    monkeypatch.setattr(google.auth, "default", no_credentials)
    with pytest.raises(submit.CredentialsError, match="gcloud auth application-default login"):
        submit.default_credentials()


def test_kfp_submission_through_the_kfp_client_carries_root_parameters_and_spec(kubeflow_profile):
    """`hftfx submit --kfp-host` with the real kfp.Client, received by a fake KFP API on 127.0.0.1."""
    fake = fake_kfp.FakeKfp()
    values = run_parameters.values(kubeflow_profile, {"span": 4})
    with fake_kfp.serve(fake) as host:
        run = submit.kfp_run(kubeflow_profile, host, ROOT / KUBEFLOW_PIPELINE_YAML, values)
        result = submit.submit_to_kfp(run)
    assert result.run_id == "run-1"
    (sent,) = fake.runs()
    assert sent["experiment_id"] == fake.experiments["hf-text-classifier-kfp"]
    assert sent["display_name"] == "hf-text-classifier-kfp-span-4"
    assert sent["runtime_config"]["pipeline_root"] == "gs://my-hftfx-bucket/kubeflow-root"
    assert sent["runtime_config"]["parameters"] == {
        "span": 4,
        "dataset_revision": "",
        "epochs": "3",
    }  # learning_rate is auto in the config: left out, the compiled default (auto: the Trainer chooses) applies
    assert sent["service_account"] == "hftfx-runner"
    spec = json_format.ParseDict(sent["pipeline_spec"], pipeline_spec_pb2.PipelineSpec(), ignore_unknown_fields=False)
    assert "latest_blessed_model_resolver" not in spec.root.dag.tasks
    assert all(task.caching_options.enable_cache for task in spec.root.dag.tasks.values())


def test_a_spec_compiled_from_other_cloud_settings_is_refused_and_a_fresh_compile_is_sent(profile, tmp_path):
    """The committed pipeline.yaml sent with another project, image and service account would start a
    PipelineJob in the new project whose CustomJob and images still named the old one."""
    moved = pipeline_config.load_config(
        PROFILE,
        {
            "cloud.project": "other-project",
            "cloud.image_uri": "europe-docker.pkg.dev/other-project/hftfx/pipeline:0.2.0",
            "cloud.service_account": "runner@other-project.iam.gserviceaccount.com",
        },
    )
    values = run_parameters.values(moved)
    with pytest.raises(ConfigError, match="compiled from other settings than this profile") as refused:
        submit.build_pipeline_job(moved, ROOT / PIPELINE_YAML, values, AnonymousCredentials())
    message = str(refused.value)
    for key in ("cloud.project", "cloud.image_uri", "cloud.service_account"):
        assert f"{key} (" in message
    assert '"my-gcp-project" -> "other-project"' in message and "hftfx compile --config" in message
    assert "dataset." not in message and "training." not in message  # only what differs is named
    job = submit.build_pipeline_job(moved, compiled(moved, tmp_path), values, AnonymousCredentials())
    request = submit.create_job_request(job, moved)
    assert request.parent == "projects/other-project/locations/us-central1"
    assert "other-project/hftfx/pipeline:0.2.0" in json.dumps(submit.request_json(request))
