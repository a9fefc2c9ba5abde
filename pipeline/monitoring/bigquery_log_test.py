"""The endpoint's request-response log read from BigQuery: the query google-cloud-bigquery sends, received by a
fake BigQuery as its REST body, and the rows it answers turned into a prediction-log window."""

import datetime

import pytest
from google.auth.credentials import AnonymousCredentials

from models.errors import UserError
from pipeline.monitoring.bigquery_log import read_bigquery_window, table_id
from tests import fake_bigquery

TABLE = "my-gcp-project.logging_hf_text_classifier_1.request_response_logging"
ANSWER = {"probabilities": [0.3, 0.7], "label_id": 1, "label": "fresh", "confidence": 0.7}
T0 = datetime.datetime(2026, 11, 29, 9, tzinfo=datetime.UTC)


def _client(monkeypatch, address):
    from google.cloud import bigquery

    monkeypatch.setenv("BIGQUERY_EMULATOR_HOST", address)
    return bigquery.Client(project="my-gcp-project", credentials=AnonymousCredentials())


def test_the_newest_deployed_models_rows_since_a_time_become_a_window(monkeypatch):
    logged = [
        fake_bigquery.LoggedRequest("111", T0, ["old model's text"], [ANSWER]),
        fake_bigquery.LoggedRequest("222", T0 + datetime.timedelta(hours=1), ["a fine film", {"text": "dull"}], [
            ANSWER, ANSWER
        ]),
        fake_bigquery.LoggedRequest("222", T0 + datetime.timedelta(hours=2), [{"b64": "CgA="}], [ANSWER]),
    ]
    fake = fake_bigquery.FakeBigQuery(TABLE, logged)
    with fake_bigquery.serve(fake) as address:
        window = read_bigquery_window(f"bq://{TABLE}", client=_client(monkeypatch, address))
        since = read_bigquery_window(TABLE, "111", T0, client=_client(monkeypatch, address))

    assert window.version == "222" and window.other_versions == {"111": 1}
    assert [row["text"] for row in window.rows] == ["a fine film", "dull"] and window.skipped_lines == 1
    assert window.rows[0]["probabilities"] == [0.3, 0.7] and window.rows[0]["time"].startswith("2026-11-29T10:00")
    first, second = fake.received
    assert f"FROM `{TABLE}`" in first["query"] and first["useLegacySql"] is False
    assert first["parameterMode"] == "NAMED" and {p["name"] for p in first["queryParameters"]} == {"since"}
    parameters = {p["name"]: p for p in second["queryParameters"]}
    assert parameters["since"]["parameterType"]["type"] == "TIMESTAMP"
    assert parameters["deployed_model_id"]["parameterValue"]["value"] == "111"
    assert [row["text"] for row in since.rows] == ["old model's text"]


def test_an_empty_table_and_a_bad_name_are_refused(monkeypatch):
    with (
        fake_bigquery.serve(fake_bigquery.FakeBigQuery(TABLE, [])) as address,
        pytest.raises(UserError, match="holds no logged requests"),
    ):
        read_bigquery_window(TABLE, client=_client(monkeypatch, address))
    with pytest.raises(UserError, match=r"bq://project\.dataset\.table"):
        table_id("my-table")
