"""The pushed model behind Vertex AI's custom serving container contract: the pipeline image's default command.

Why our own server rather than a prebuilt one: the model is exported by TensorFlow 2.21 and its graph needs
three tensorflow_text ops; Vertex AI's prebuilt TensorFlow serving containers stop well below 2.21 (newer
graphs are not promised to load on older TensorFlow), and TFX's Vertex Pusher passes `Model.upload` nothing
but an image URI. This runs the training TensorFlow and tensorflow_text themselves and answers TF Serving's
REST body format (models/serving_contract.py), so a request means the same at an endpoint and at TF Serving.

The contract (Vertex AI sets these variables in the container):
- AIP_STORAGE_URI: where Vertex copied the model's artifacts (the SavedModel folder, usually gs://);
- AIP_HTTP_PORT (default 8080), AIP_HEALTH_ROUTE (GET: 200 once the model answers), AIP_PREDICT_ROUTE
  (POST {"instances": [...]} -> {"predictions": [...]}; a bad request is a 400 with {"error": ...}).
"""

from __future__ import annotations

import json
import os
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from absl import logging

from models import serving_contract
from models.remote_folder import localize
from models.serving import load_serving_model

DEFAULT_PORT = 8080
DEFAULT_HEALTH_ROUTE = "/health"
DEFAULT_PREDICT_ROUTE = "/predict"


class PredictionServer(ThreadingHTTPServer):
    """Answers the health and predict routes; one model call at a time (TensorFlow parallelizes inside it)."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], model, health_route: str, predict_route: str):
        self.model = model
        self.health_route = health_route
        self.predict_route = predict_route
        self.model_lock = threading.Lock()
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: PredictionServer

    def _send(self, status: HTTPStatus, body: dict) -> None:
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path != self.server.health_route:
            self._send(HTTPStatus.NOT_FOUND, {"error": f"no route {self.path}"})
            return
        self._send(HTTPStatus.OK, {"status": "ready"})

    def do_POST(self) -> None:
        if self.path != self.server.predict_route:
            self._send(HTTPStatus.NOT_FOUND, {"error": f"no route {self.path}"})
            return
        try:
            payload = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"null")
            with self.server.model_lock:
                response = serving_contract.predict(self.server.model, payload)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            self._send(HTTPStatus.BAD_REQUEST, {"error": f"the request body is not JSON: {error}"})
        except serving_contract.BadRequestError as error:
            self._send(HTTPStatus.BAD_REQUEST, {"error": str(error)})
        else:
            self._send(HTTPStatus.OK, response)

    def log_message(self, format: str, *args) -> None:
        logging.info("%s %s", self.address_string(), format % args)


def serve(model_uri: str | None = None, port: int | None = None) -> None:
    """Loads the model (AIP_STORAGE_URI unless given), replays its warm-up requests, then serves forever."""
    model_uri = model_uri or os.environ.get("AIP_STORAGE_URI", "")
    if not model_uri:
        raise SystemExit("no model: set AIP_STORAGE_URI (Vertex AI does) or pass --model")
    version_dir, model = load_serving_model(localize(model_uri))
    replayed = serving_contract.replay_warmup_requests(model, str(version_dir))
    server = PredictionServer(
        ("0.0.0.0", port or int(os.environ.get("AIP_HTTP_PORT", DEFAULT_PORT))),
        model,
        os.environ.get("AIP_HEALTH_ROUTE", DEFAULT_HEALTH_ROUTE),
        os.environ.get("AIP_PREDICT_ROUTE", DEFAULT_PREDICT_ROUTE),
    )
    print(
        f"serving {version_dir} ({replayed} warm-up requests replayed) on port {server.server_address[1]}: "
        f"POST {server.predict_route}, GET {server.health_route}",
        flush=True,
    )
    server.serve_forever()
