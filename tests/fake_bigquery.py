"""BigQuery's jobs.query on 127.0.0.1: a real HTTP server answering `POST /bigquery/v2/projects/<p>/queries` as
BigQuery's REST API does, reached by google-cloud-bigquery through BIGQUERY_EMULATOR_HOST (the client's own
setting). It holds one Vertex request-response log table and answers the monitor's query from it: the rows since
the `since` parameter, of the `deployed_model_id` parameter when given, in the API's f/v row encoding. Every
request body is recorded as it arrived; a query naming another table gets BigQuery's 404."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import http.server
import json
import re
import threading

SCHEMA = [
    {"name": "endpoint", "type": "STRING", "mode": "NULLABLE"},
    {"name": "deployed_model_id", "type": "STRING", "mode": "NULLABLE"},
    {"name": "logging_time", "type": "TIMESTAMP", "mode": "NULLABLE"},
    {"name": "request_id", "type": "NUMERIC", "mode": "NULLABLE"},
    {"name": "request_payload", "type": "STRING", "mode": "REPEATED"},
    {"name": "response_payload", "type": "STRING", "mode": "REPEATED"},
]


@dataclasses.dataclass
class LoggedRequest:
    deployed_model_id: str
    logging_time: datetime.datetime
    instances: list  # each written to request_payload as its JSON, as Vertex logs them
    predictions: list
    endpoint: str = "projects/p/locations/us-central1/endpoints/1"


@dataclasses.dataclass
class FakeBigQuery:
    table: str  # project.dataset.table
    rows: list[LoggedRequest]
    received: list[dict] = dataclasses.field(default_factory=list)

    def answer(self, body: dict) -> tuple[int, dict]:
        self.received.append(body)
        named = re.search(r"FROM `([^`]+)`", body.get("query", ""))
        if not named or named.group(1) != self.table:
            return 404, {"error": {"code": 404, "message": f"Not found: Table {named and named.group(1)}"}}
        values = {p["name"]: p["parameterValue"]["value"] for p in body.get("queryParameters", [])}
        since = datetime.datetime.fromisoformat(values["since"].replace(" ", "T")).replace(tzinfo=datetime.UTC)
        kept = [r for r in self.rows if r.logging_time >= since]
        if "deployed_model_id" in values:
            kept = [r for r in kept if r.deployed_model_id == values["deployed_model_id"]]
        kept.sort(key=lambda r: r.logging_time)
        micros = body.get("formatOptions", {}).get("useInt64Timestamp")
        return 200, {
            "kind": "bigquery#queryResponse",
            "jobComplete": True,
            "schema": {"fields": SCHEMA},
            "totalRows": str(len(kept)),
            "rows": [self._encoded(r, micros) for r in kept],
            "queryId": f"query-{len(self.received)}",
        }

    @staticmethod
    def _encoded(row: LoggedRequest, micros: bool) -> dict:
        stamp = row.logging_time.timestamp()
        when = str(int(stamp * 1e6)) if micros else f"{stamp:.6f}"
        repeated = lambda values: [{"v": json.dumps(v)} for v in values]  # noqa: E731
        cells = [row.endpoint, row.deployed_model_id, when, "1", repeated(row.instances), repeated(row.predictions)]
        return {"f": [{"v": cell} for cell in cells]}


@contextlib.contextmanager
def serve(fake: FakeBigQuery):
    """Serves `fake` on a free port of 127.0.0.1; yields http://host:port for BIGQUERY_EMULATOR_HOST."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            asked = self.path.split("?", 1)[0]
            status, answer = fake.answer(body) if asked.endswith("/queries") else (404, {"error": {"code": 404}})
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
