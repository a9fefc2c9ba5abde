"""A Vertex endpoint's request-response log in BigQuery, read as a prediction log window (what `hftfx serve
--log-dir` writes locally), so `hftfx monitor --bigquery` checks what the endpoint served.

Vertex writes one row per logged request: endpoint, deployed_model_id, logging_time, request_id, request_payload
(the instances, one JSON string each) and response_payload (the predictions, one JSON string each). The query is
sent with google-cloud-bigquery (BIGQUERY_EMULATOR_HOST, its own setting, points it at another host), with the
window's bounds as query parameters. Each deployed model is one version: the newest one unless named.
"""

from __future__ import annotations

import datetime
import json
import re

from models.errors import UserError
from models.names import TEXT_FEATURE, TEXT_PAIR_FEATURE
from models.serving.prediction_log import LoggedWindow

_TABLE = re.compile(r"(?:bq://)?(?P<project>[a-z0-9.:-]+)\.(?P<dataset>\w+)\.(?P<table>\w+)")
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def table_id(uri: str) -> tuple[str, str]:
    """(project, project.dataset.table) of `bq://project.dataset.table` (or without bq://)."""
    match = _TABLE.fullmatch(uri.strip())
    if not match:
        raise UserError(f"{uri!r} is not a BigQuery table: give bq://project.dataset.table (cloud.endpoint_log_table)")
    return match["project"], f"{match['project']}.{match['dataset']}.{match['table']}"


def query(table: str, deployed_model_id: str | None) -> str:
    only = " AND deployed_model_id = @deployed_model_id" if deployed_model_id else ""
    return (
        "SELECT deployed_model_id, logging_time, request_payload, response_payload "
        f"FROM `{table}` WHERE logging_time >= @since{only} ORDER BY logging_time"
    )


def _instance_texts(instance) -> dict[str, str] | None:
    """The texts of one logged instance (a string, or {"text": ..., "text_pair": ...}), or None."""
    if isinstance(instance, str):
        return {TEXT_FEATURE: instance}
    if isinstance(instance, dict) and isinstance(instance.get(TEXT_FEATURE), str):
        return {k: v for k, v in instance.items() if k in (TEXT_FEATURE, TEXT_PAIR_FEATURE) and isinstance(v, str)}
    return None


def logged_rows(record, window: LoggedWindow) -> list[dict]:
    """The prediction-log rows of one BigQuery row; instances that are not texts (tf.Examples) are counted."""
    rows = []
    at = record["logging_time"].isoformat(timespec="milliseconds")
    for instance, answer in zip(record["request_payload"] or [], record["response_payload"] or [], strict=False):
        try:
            texts, prediction = _instance_texts(json.loads(instance)), json.loads(answer)
        except (TypeError, ValueError):
            texts = prediction = None
        if texts is None or not isinstance(prediction, dict) or not isinstance(prediction.get("probabilities"), list):
            window.skipped_lines += 1
            continue
        chars = sum(len(text) for text in texts.values())
        rows.append({"time": at, "model_version": record["deployed_model_id"], **texts, "chars": chars, **prediction})
    return rows


def read_bigquery_window(
    uri: str, deployed_model_id: str | None = None, since: datetime.datetime | None = None, client=None
) -> LoggedWindow:
    """The rows one deployed model logged since `since` (default: all), the newest deployed model unless named."""
    from google.cloud import bigquery

    project, table = table_id(uri)
    client = client or bigquery.Client(project=project)
    parameters = [bigquery.ScalarQueryParameter("since", "TIMESTAMP", since or EPOCH)]
    if deployed_model_id:
        parameters.append(bigquery.ScalarQueryParameter("deployed_model_id", "STRING", deployed_model_id))
    config = bigquery.QueryJobConfig(query_parameters=parameters)
    records = list(client.query_and_wait(query(table, deployed_model_id), job_config=config))
    if not records:
        raise UserError(f"{table} holds no logged requests{' of ' + deployed_model_id if deployed_model_id else ''}")
    newest = deployed_model_id or max(records, key=lambda r: r["logging_time"])["deployed_model_id"]
    others: dict[str, int] = {}
    window = LoggedWindow(newest, [])
    for record in records:
        if record["deployed_model_id"] != newest:
            others[record["deployed_model_id"]] = others.get(record["deployed_model_id"], 0) + 1
            continue
        window.rows += logged_rows(record, window)
    window.other_versions = others
    return window
