"""Vertex batch prediction jobs of the served model, as the API receives them."""

import pytest
from google.auth.credentials import AnonymousCredentials

from pipeline.cloud.kubeflow_v2_runner import compile_spec
from pipeline.config import pipeline_config
from tests.cloud_specs import KMS_KEY, at_api, push_to_endpoint


def test_a_vertex_batch_prediction_job_runs_the_model_the_endpoint_serves(profile, vertex_api):
    """`hftfx predict --on vertex`: aiplatform's BatchPredictionJob request, as the JobService receives it, names
    the model with the endpoint's traffic (the newest push, the earlier one kept at 0%), the JSON lines in and
    the prefix out, the profile's machines, serving identity, CMEK key and labels."""
    from google.cloud import aiplatform_v1

    from pipeline.cloud.vertex_batch import submit_batch_prediction

    fake, address = vertex_api
    config = at_api(
        profile,
        address,
        endpoint_keep_previous=1,
        encryption_key=KMS_KEY,
        serving_service_account="serving@my-gcp-project.iam.gserviceaccount.com",
        labels={"team": "reviews"},
    )
    spec = compile_spec(config)
    for version in (1700000000, 1700000100):
        newest = push_to_endpoint(spec, version)
    job = submit_batch_prediction(
        config, ["gs://my-hftfx-bucket/unlabeled/*.jsonl"], "gs://my-hftfx-bucket/scored/", AnonymousCredentials()
    )

    (request,) = fake.requests("JobService/CreateBatchPredictionJob")
    assert request.parent == "projects/my-gcp-project/locations/us-central1"
    sent = request.batch_prediction_job
    assert sent.model.split("@")[0] == newest == fake.models[-1].name and len(fake.endpoints[0].deployed_models) == 2
    assert sent.input_config.instances_format == "jsonl"
    assert list(sent.input_config.gcs_source.uris) == ["gs://my-hftfx-bucket/unlabeled/*.jsonl"]
    assert sent.output_config.predictions_format == "jsonl"
    assert sent.output_config.gcs_destination.output_uri_prefix == "gs://my-hftfx-bucket/scored/"
    resources = sent.dedicated_resources
    assert (resources.machine_spec.machine_type, resources.starting_replica_count) == ("n1-standard-4", 1)
    assert resources.max_replica_count == 4
    assert sent.service_account == "serving@my-gcp-project.iam.gserviceaccount.com"
    assert sent.encryption_spec.kms_key_name == KMS_KEY
    assert dict(sent.labels) == {"team": "reviews"}
    assert job.resource_name == fake.batch_jobs[0].name
    assert fake.batch_jobs[0].state == aiplatform_v1.JobState.JOB_STATE_PENDING


@pytest.mark.parametrize(
    ("inputs", "output", "message"),
    [
        (["data/local.jsonl"], "gs://my-hftfx-bucket/out/", "JSON lines in Cloud Storage"),
        (["gs://my-hftfx-bucket/in.csv"], "gs://my-hftfx-bucket/out/", "JSON lines in Cloud Storage"),
        (["gs://my-hftfx-bucket/in.jsonl"], "scored/", "a gs:// prefix"),
    ],
)
def test_a_vertex_batch_job_refuses_locations_it_cannot_read_or_write(profile, vertex_api, inputs, output, message):

    from pipeline.cloud.vertex_batch import submit_batch_prediction

    fake, address = vertex_api
    with pytest.raises(pipeline_config.ConfigError, match=message):
        submit_batch_prediction(at_api(profile, address), inputs, output, AnonymousCredentials())
    assert not fake.received


def test_a_vertex_batch_job_without_a_served_model_says_what_to_do(profile, vertex_api):

    from pipeline.cloud.vertex_batch import submit_batch_prediction

    _, address = vertex_api
    with pytest.raises(
        pipeline_config.ConfigError, match="no model is deployed on an endpoint named 'hf-text-classifier'"
    ):
        submit_batch_prediction(
            at_api(profile, address),
            ["gs://my-hftfx-bucket/in.jsonl"],
            "gs://my-hftfx-bucket/out/",
            AnonymousCredentials(),
        )
