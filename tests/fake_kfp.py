"""A fake Kubeflow Pipelines API (v2beta1 REST) on 127.0.0.1, for the real `kfp.Client` to talk to.

It answers the health check, finds or creates the experiment, and accepts runs, recording each request's
method, path and JSON body as it arrived.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json

from tests.fake_vertex import QuietHandler, http_server


@dataclasses.dataclass
class Received:
    method: str
    path: str
    body: dict | None


class FakeKfp:
    def __init__(self):
        self.received: list[Received] = []
        self.experiments: dict[str, str] = {}  # display name -> id

    def runs(self) -> list[dict]:
        return [r.body for r in self.received if (r.method, r.path) == ("POST", "/apis/v2beta1/runs")]

    def answer(self, method: str, path: str, body: dict | None) -> dict:
        self.received.append(Received(method, path, body))
        if path.startswith("/apis/v2beta1/experiments") and method == "GET":
            return {"experiments": [{"experiment_id": i, "display_name": n} for n, i in self.experiments.items()]}
        if path == "/apis/v2beta1/experiments":
            experiment_id = self.experiments.setdefault(body["display_name"], f"experiment-{len(self.experiments) + 1}")
            return {"experiment_id": experiment_id, "display_name": body["display_name"]}
        if path == "/apis/v2beta1/runs":
            return {"run_id": f"run-{len(self.runs())}", "display_name": body["display_name"], "state": "PENDING"}
        return {}  # healthz


@contextlib.contextmanager
def serve(fake: FakeKfp):
    """Serves `fake` on a free port of 127.0.0.1; yields its URL for `--kfp-host`."""

    class Handler(QuietHandler):
        def _handle(self, method):
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            self.reply(200, json.dumps(fake.answer(method, self.path, body)).encode())

        def do_GET(self):
            self._handle("GET")

        def do_POST(self):
            self._handle("POST")

    with http_server(Handler) as port:
        yield f"http://127.0.0.1:{port}"
