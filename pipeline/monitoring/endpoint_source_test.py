import datetime

import pytest
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform_v1

from models.errors import UserError
from pipeline.cloud.vertex_jobs import service_client
from pipeline.config import pipeline_config
from pipeline.monitoring.endpoint_source import EndpointSource, endpoint_source
from tests import fake_vertex

PARENT = "projects/my-gcp-project/locations/us-central1"
TABLE = "bq://my-gcp-project.logging_hf_text_classifier_1.request_response_logging"


def _endpoint(split: dict[str, int], logged: bool = True) -> aiplatform_v1.Endpoint:
    at = datetime.datetime(2026, 11, 1, tzinfo=datetime.UTC)
    deployed = [
        aiplatform_v1.DeployedModel(id=str(i), model=f"{PARENT}/models/{i}", create_time=at + datetime.timedelta(i))
        for i in (1, 2, 3)
    ]
    logging = aiplatform_v1.PredictRequestResponseLoggingConfig(
        enabled=logged, sampling_rate=0.1, bigquery_destination=aiplatform_v1.BigQueryDestination(output_uri=TABLE)
    )
    return aiplatform_v1.Endpoint(
        name=f"{PARENT}/endpoints/1",
        display_name="hf-text-classifier",
        deployed_models=deployed,
        traffic_split=split,
        predict_request_response_logging_config=logging,
    )


def test_the_endpoint_names_its_log_table_and_the_model_serving_most_of_its_traffic(monkeypatch):
    """Through Vertex's EndpointService and ModelService (a fake at the wire): a canary's 20% does not make it the
    model checked, a tie goes to the newest, and an endpoint that does not log is refused with the setting."""
    fake = fake_vertex.FakeVertex()
    fake.models.extend(
        aiplatform_v1.Model(name=f"{PARENT}/models/{i}", artifact_uri=f"gs://b/root/job-{i}/Trainer_4/model")
        for i in (1, 2, 3)
    )
    config = pipeline_config.load_config(
        overrides={"cloud": {"project": "my-gcp-project", "endpoint_name": "hf-text-classifier"}}
    )
    with fake_vertex.serve(fake) as address, fake_vertex.plaintext_channels(monkeypatch, address):
        cloud = config.cloud.model_copy(update={"api_endpoint": address})
        endpoints = service_client(cloud, aiplatform_v1.EndpointServiceClient, AnonymousCredentials())
        models = service_client(cloud, aiplatform_v1.ModelServiceClient, AnonymousCredentials())
        fake.endpoints[:] = [_endpoint({"1": 80, "3": 20})]
        assert endpoint_source(config, endpoints, models) == EndpointSource(TABLE, "1", "gs://b/root/job-1/Trainer_4/model")
        fake.endpoints[:] = [_endpoint({"1": 50, "2": 50})]
        assert endpoint_source(config, endpoints, models).deployed_model_id == "2"
        fake.endpoints[:] = [_endpoint({"1": 100}, logged=False)]
        with pytest.raises(UserError, match=r"does not log requests to BigQuery: set cloud\.endpoint_log_sample"):
            endpoint_source(config, endpoints, models)
        fake.endpoints[:] = []
        with pytest.raises(UserError, match="0 endpoints are named hf-text-classifier"):
            endpoint_source(config, endpoints, models)
