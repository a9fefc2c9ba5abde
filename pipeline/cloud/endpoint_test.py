"""Pushes to a Vertex endpoint: the requests aiplatform sends, received by the fake Vertex API as its protos."""

import json
import re

import pytest
from google.auth.credentials import AnonymousCredentials

from pipeline import cli
from pipeline.cloud import submit
from pipeline.cloud.kubeflow_v2_runner import compile_spec
from pipeline.cloud.profile import validate_cloud
from pipeline.cloud.vertex_jobs import serving_image
from pipeline.config.pipeline_config import ConfigError
from tests.cloud_specs import (
    KMS_KEY,
    PROFILE,
    at_api,
    custom_config_of,
    executor_of,
    push_to_endpoint,
)


def test_endpoint_pusher_deploys_on_a_tf_serving_container(committed, profile):
    assert executor_of(committed, "Pusher")["container"]["args"][1] == "components.pusher.executor.EndpointExecutor"
    parameters = committed["root"]["dag"]["tasks"]["Pusher"]["inputs"]["parameters"]
    custom_config = json.loads(parameters["custom_config"]["runtimeValue"]["constant"])
    assert custom_config["ai_platform_vertex_container_image_uri"] == profile.cloud.image_uri  # `hftfx serve`
    assert custom_config["ai_platform_serving_args"] == {
        "project_id": "my-gcp-project",
        "endpoint_name": "hf-text-classifier",
        "machine_type": "n1-standard-4",
        "min_replica_count": 1,
        "max_replica_count": 1,
        "traffic_percentage": 100,
        "service_account": "hftfx-serving@my-gcp-project.iam.gserviceaccount.com",
    }


def test_endpoint_push_creates_the_endpoint_uploads_and_deploys_the_model_under_the_cmek_key(profile, vertex_api):
    fake, address = vertex_api
    model_name = push_to_endpoint(compile_spec(at_api(profile, address, encryption_key=KMS_KEY)), 1700000000)

    (created,) = fake.requests("EndpointService/CreateEndpoint")
    assert created.parent == "projects/my-gcp-project/locations/us-central1"
    assert created.endpoint.display_name == "hf-text-classifier"
    assert created.endpoint.encryption_spec.kms_key_name == KMS_KEY
    (uploaded,) = fake.requests("ModelService/UploadModel")
    assert uploaded.model.encryption_spec.kms_key_name == KMS_KEY
    assert uploaded.model.display_name == "v1700000000"
    assert uploaded.model.artifact_uri == "gs://my-hftfx-bucket/pipeline-root/Pusher/pushed_model/1700000000"
    assert uploaded.model.container_spec.image_uri == serving_image(profile.cloud) == profile.cloud.image_uri
    (deployed,) = fake.requests("EndpointService/DeployModel")
    assert deployed.endpoint == fake.endpoints[0].name
    resources = deployed.deployed_model.dedicated_resources
    assert (resources.machine_spec.machine_type, resources.min_replica_count) == ("n1-standard-4", 1)
    assert deployed.deployed_model.model.split("@")[0] == model_name == fake.models[0].name
    assert dict(deployed.traffic_split) == {"0": 100}


@pytest.mark.parametrize("keep", [0, 1])
def test_each_push_retires_the_models_before_it_but_the_kept_ones(profile, vertex_api, keep):
    """TFX alone leaves every earlier model deployed at 0% traffic; the EndpointPusher undeploys them."""
    from components.pusher.endpoint import retire_previous_models

    fake, address = vertex_api
    config = at_api(
        profile,
        address,
        endpoint_keep_previous=keep,
        serving_service_account="serving@my-gcp-project.iam.gserviceaccount.com",
    )
    spec = compile_spec(config)
    retired = []
    for version in (1700000000, 1700000100, 1700000200):
        model_name = push_to_endpoint(spec, version)
        retired += retire_previous_models(custom_config_of(spec, "Pusher"), model_name)

    (endpoint,) = fake.endpoints
    newest = fake.models[-1].name
    left = {m.model.split("@")[0] for m in endpoint.deployed_models}
    assert left == {newest, *[m.name for m in fake.models[-1 - keep : -1]]}
    assert endpoint.traffic_split[next(m.id for m in endpoint.deployed_models if m.model.startswith(newest))] == 100
    assert len(fake.requests("EndpointService/UndeployModel")) == len(retired) == 2 - keep
    assert all(
        r.deployed_model.service_account == config.cloud.serving_service_account
        for r in fake.requests("EndpointService/DeployModel")
    )


def test_replicas_and_a_gpu_reach_the_deploy_request(profile, vertex_api):
    fake, address = vertex_api
    config = at_api(
        profile, address, endpoint_min_replicas=2, endpoint_max_replicas=6, endpoint_accelerator="l4",
        endpoint_machine_type="g2-standard-8",
    )  # fmt: skip
    push_to_endpoint(compile_spec(config), 1700000000)

    (deployed,) = fake.requests("EndpointService/DeployModel")
    resources = deployed.deployed_model.dedicated_resources
    assert (resources.min_replica_count, resources.max_replica_count) == (2, 6)
    assert resources.machine_spec.machine_type == "g2-standard-8"
    assert (resources.machine_spec.accelerator_type.name, resources.machine_spec.accelerator_count) == ("NVIDIA_L4", 1)


@pytest.mark.parametrize(
    ("cloud", "message"),
    [
        ({"endpoint_accelerator": "a100"}, "a100 runs on a2-highgpu-* machines, not n1-standard-4"),
        ({"endpoint_accelerator": "tpu-v5e-1"}, "is not one of"),
        ({"endpoint_min_replicas": 3, "endpoint_max_replicas": 2}, "is below endpoint_min_replicas 3"),
        ({"endpoint_traffic_percentage": 0}, "must be 1 to 100"),
    ],
)
def test_endpoint_settings_vertex_would_refuse_are_refused_before_compiling(profile, cloud, message):
    config = profile.model_copy(update={"cloud": profile.cloud.model_copy(update=cloud)})
    with pytest.raises(ConfigError, match=re.escape(message)):
        validate_cloud(config)


def test_a_canary_takes_its_share_keeps_the_serving_model_and_promote_gives_it_all(
    profile, vertex_api, monkeypatch, capsys
):
    """A push at 10% leaves the model serving the rest in place; `hftfx promote` moves all the traffic to the
    newest model (UpdateEndpoint) and retires the one before it."""
    from components.pusher.endpoint import retire_previous_models

    fake, address = vertex_api
    stable = compile_spec(at_api(profile, address))
    push_to_endpoint(stable, 1700000000)
    canary = compile_spec(at_api(profile, address, endpoint_traffic_percentage=10))
    assert retire_previous_models(custom_config_of(canary, "Pusher"), push_to_endpoint(canary, 1700000100)) == []

    (endpoint,) = fake.endpoints
    first, second = endpoint.deployed_models
    assert dict(endpoint.traffic_split) == {first.id: 90, second.id: 10}

    monkeypatch.setattr(submit, "default_credentials", AnonymousCredentials)
    assert cli.main(["promote", "--config", str(PROFILE), "--set", f"cloud.api_endpoint={address}"]) == 0

    (update,) = fake.requests("EndpointService/UpdateEndpoint")
    assert dict(update.endpoint.traffic_split) == {second.id: 100} and list(update.update_mask.paths) == [
        "traffic_split"
    ]
    assert [m.id for m in endpoint.deployed_models] == [second.id] and dict(endpoint.traffic_split) == {second.id: 100}
    assert f"deployed model {second.id} now takes 100% of the traffic; undeployed {first.id}" in capsys.readouterr().out


def test_the_clean_up_finds_the_endpoint_it_pushed_to_among_endpoints_of_the_same_name(profile, vertex_api):
    """Display names are not unique: another endpoint named alike (created by hand, say) is left alone."""
    from google.cloud import aiplatform_v1

    from components.pusher.endpoint import retire_previous_models

    fake, address = vertex_api
    spec = compile_spec(at_api(profile, address))
    retired = []
    for version in (1700000000, 1700000100):
        retired += retire_previous_models(custom_config_of(spec, "Pusher"), push_to_endpoint(spec, version))
        if version == 1700000000:  # a second endpoint of the same display name appears after the first push
            fake.endpoints.append(
                aiplatform_v1.Endpoint(
                    name="projects/my-gcp-project/locations/us-central1/endpoints/999",
                    display_name="hf-text-classifier",
                )
            )
    assert len(retired) == 1
    assert len(fake.endpoints[0].deployed_models) == 1 and not fake.endpoints[1].deployed_models


def test_a_push_turns_on_request_response_logging_to_bigquery_once(profile, vertex_api):
    """cloud.endpoint_log_sample: after TFX's push (its endpoint has no logging), the endpoint service's
    UpdateEndpoint names the one field; a second push finds it on and sends nothing more."""
    from components.pusher.endpoint import log_requests

    fake, address = vertex_api
    table = "bq://my-gcp-project.serving_logs.text_classifier"
    spec = compile_spec(at_api(profile, address, endpoint_log_sample=0.25, endpoint_log_table=table))
    pushes = (push_to_endpoint(spec, version) for version in (1700000000, 1700000100))
    changed = [log_requests(custom_config_of(spec, "Pusher"), model) for model in pushes]

    assert changed == [True, False]
    (updated,) = fake.requests("EndpointService/UpdateEndpoint")
    assert list(updated.update_mask.paths) == ["predict_request_response_logging_config"]
    assert updated.endpoint.name == fake.endpoints[0].name
    logging = updated.endpoint.predict_request_response_logging_config
    assert (logging.enabled, logging.sampling_rate, logging.bigquery_destination.output_uri) == (True, 0.25, table)
    assert fake.endpoints[0].predict_request_response_logging_config == logging


def test_without_a_log_sample_the_endpoint_is_left_as_tfx_made_it(profile, vertex_api):
    from components.pusher.endpoint import REQUEST_LOGGING_KEY, log_requests

    fake, address = vertex_api
    spec = compile_spec(at_api(profile, address, endpoint_log_sample=0.0))
    assert REQUEST_LOGGING_KEY not in custom_config_of(spec, "Pusher")
    assert not log_requests(custom_config_of(spec, "Pusher"), push_to_endpoint(spec, 1700000000))
    assert not fake.requests("EndpointService/UpdateEndpoint")
