"""`hftfx serve` started as a Vertex AI endpoint starts its container: the AIP_* variables, then the health
route polled until the model answers. Shared by the e2e test and, inside the image, by image_checks.py (plain
imports only: there this folder is mounted as /checks and is the import path)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

DEPLOYED_MODEL_ROUTE = "/v1/endpoints/123/deployedModels/456"  # the shape of the routes Vertex sets


@dataclasses.dataclass(frozen=True)
class Container:
    base: str  # http://127.0.0.1:<port>
    health: str
    predict: str
    pid: int = 0
    output: list[str] = dataclasses.field(default_factory=list)  # what the server printed, once it has stopped


def http_json(url: str, body: dict | None = None) -> tuple[int, dict]:
    """(status, JSON body) of a GET, or of a POST of `body`; HTTP errors are answers too."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@contextlib.contextmanager
def serving(command: list[str], model_uri: str, ready_seconds: float = 240):
    """Runs `command` (hftfx serve) with the variables Vertex AI sets; yields a Container once it is healthy."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # The server copies a gs:// or file:// model to a temporary folder that lives as long as its container;
    # here that is this context, so the copy goes under a folder removed with it.
    scratch = tempfile.TemporaryDirectory(prefix="hftfx-serve-")
    env = {
        **os.environ,
        "TMPDIR": scratch.name,
        "AIP_HTTP_PORT": str(port),
        "AIP_HEALTH_ROUTE": DEPLOYED_MODEL_ROUTE,
        "AIP_PREDICT_ROUTE": f"{DEPLOYED_MODEL_ROUTE}:predict",
        "AIP_STORAGE_URI": model_uri,
    }
    server = subprocess.Popen(command, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    container = Container(base, base + DEPLOYED_MODEL_ROUTE, f"{base}{DEPLOYED_MODEL_ROUTE}:predict", server.pid)
    try:
        deadline = time.monotonic() + ready_seconds
        while True:
            assert server.poll() is None, server.stdout.read()[-3000:]
            with contextlib.suppress(OSError):
                if http_json(container.health) == (200, {"status": "ready"}):
                    break
            assert time.monotonic() < deadline, "the server did not become healthy"
            time.sleep(1)
        yield container
    finally:
        server.terminate()
        container.output.extend(server.communicate(timeout=60)[0].splitlines())
        scratch.cleanup()
