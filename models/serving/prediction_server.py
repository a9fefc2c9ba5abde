"""The pushed model behind Vertex AI's custom serving container contract: the pipeline image's default command.

Why our own server rather than a prebuilt one: the model is exported by TensorFlow 2.21 and its graph needs
three tensorflow_text ops; Vertex AI's prebuilt TensorFlow serving containers stop well below 2.21 (newer
graphs are not promised to load on older TensorFlow), and TFX's Vertex Pusher passes `Model.upload` nothing
but an image URI. This runs the training TensorFlow and tensorflow_text themselves and answers TF Serving's
REST body format (models/serving/tf_serving.py), so a request means the same at an endpoint and at TF Serving.

The HTTP side is Starlette on uvicorn (the maintained ASGI pair, both already in the stack), which shuts down
gracefully on SIGTERM, as Vertex stops replicas. Requests arriving together are answered by one model call
(batcher.py: dynamic batching, bounded in rows and bytes, clients in turn, a failing call bisected). Every
malformed body gets a 4xx with a short reason (the details go to the log): too large or larger than the whole
queue (413), too slow to arrive (408), not JSON, nested too deep, not TF Serving's shape or a signature that is not
served (400); when the queue is full, 503 with a Retry-After drawn from RETRY_AFTER_S (TF Serving answers a full
batch queue 503 too, and Vertex reads 503 as "this replica is busy"). The health route never waits behind
predictions: every request must arrive whole in time, on every route (connection_guard.py), and the in-flight cap
applies to predictions only; it answers 503 only when a model call has run past its budget (a wedged replica, which
Vertex then replaces). No answer says anything of other clients' requests.

The contract (Vertex AI sets these variables in the container):
- AIP_STORAGE_URI: where Vertex copied the model's artifacts (the SavedModel folder, usually gs://);
- AIP_HTTP_PORT (default 8080), AIP_HEALTH_ROUTE (GET: 200 once the model answers), AIP_PREDICT_ROUTE
  (POST {"instances": [...]} -> {"predictions": [...]}; a bad request is a 400 with {"error": ...}).
Inside that container it binds every interface, as Vertex's health checks need; elsewhere 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
import logging
import os
import random
import resource
from typing import Any

from models.errors import UserError
from models.hub.remote_folder import is_remote, localize
from models.names import SERVING_DEFAULT, SERVING_TF_EXAMPLE
from models.serving import tf_serving
from models.serving.batcher import Batcher, BatchLimits, NeverFits, Saturated
from models.serving.connection_guard import ConnectionLimits, guarded_protocol
from models.serving.precision import ServingPrecision
from models.serving.prediction_log import LogSettings, PredictionLog
from models.serving.pushed_model import at_precision, load_serving_model, newest_complete_version

DEFAULT_PORT = 8080
DEFAULT_HEALTH_ROUTE = "/health"
DEFAULT_PREDICT_ROUTE = "/predict"
# The signatures a client may call: the raw-text one and the tf.Example one. The others (the Evaluator's, the
# Transform's) are the pipeline's, not an API.
SERVED_SIGNATURES = (SERVING_DEFAULT, SERVING_TF_EXAMPLE)
RETRY_AFTER_S = (1, 5)  # a 503's Retry-After, drawn in this range: clients told to retry together would do so
_log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ServerLimits:
    max_body_bytes: int = 1_500_000  # Vertex AI's own online prediction request limit (1.5 MB)
    max_instances: int = 256  # per request
    request_timeout_s: float = 60.0  # from a body's arrival to its answer
    max_in_flight: int = 512  # predictions served at once (a 503 beyond); /health is never counted
    batching: BatchLimits = dataclasses.field(default_factory=BatchLimits)
    connections: ConnectionLimits = dataclasses.field(default_factory=ConnectionLimits)


class RequestError(UserError, ValueError):
    """A request the server refuses: its HTTP status, the reason and the headers of the answer."""

    def __init__(self, status: int, message: str, **headers: str):
        super().__init__(message)
        self.status, self.headers = status, headers


async def read_body(request, limits: ServerLimits) -> bytes:
    """The body, refused when too large (413) or too slow to arrive (408). A body over the limit is read to its
    end and dropped (within the read timeout) before the 413 goes out: closing on a client still sending makes
    its TCP stack discard the answer, so it would see a reset instead of the reason."""
    declared = request.headers.get("content-length")
    if declared is not None and not declared.isdigit():
        raise RequestError(400, f"Content-Length {declared!r} is not a number")
    too_large = f"the body is over the {limits.max_body_bytes}-byte limit"
    chunks, size = [], 0

    async def receive() -> None:
        nonlocal size
        async for chunk in request.stream():
            size += len(chunk)
            if size <= limits.max_body_bytes:
                chunks.append(chunk)

    try:
        await asyncio.wait_for(receive(), limits.connections.read_timeout_s)
    except TimeoutError:
        if size > limits.max_body_bytes or int(declared or 0) > limits.max_body_bytes:
            raise RequestError(413, too_large, Connection="close") from None
        slow = f"the body did not arrive within {limits.connections.read_timeout_s:g} s"
        raise RequestError(408, slow, Connection="close") from None
    if size > limits.max_body_bytes:
        raise RequestError(413, f"{too_large} ({size} bytes)")
    return b"".join(chunks)


def parse_request(body: bytes, names: tuple[str, ...], max_rows: int) -> tuple[str, dict[str, list[bytes]]]:
    """(signature, {input: UTF-8 bytes per row}) of a body, or the RequestError that refuses it. Run off the
    event loop: a 1.5 MB body's parse and row checks would stall every other connection, /health included."""
    try:
        payload = json.loads(body or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise RequestError(400, f"the request body is not JSON: {error}") from None
    except RecursionError:
        raise RequestError(400, "the request body nests arrays or objects too deeply to be a request") from None
    try:
        return tf_serving.request_rows(payload, names, max_rows)
    except tf_serving.TooManyRowsError as error:
        raise RequestError(413, str(error)) from None
    except tf_serving.BadRequestError as error:
        raise RequestError(400, str(error)) from None


def retry_after() -> str:
    return str(random.randint(*RETRY_AFTER_S))


class PredictionRoutes:
    """The server's two routes: health, and predict through the Batcher, each request answered or refused alone."""

    def __init__(self, model, limits: ServerLimits, log: PredictionLog | None = None):
        self.model, self.limits, self.log = model, limits, log
        self.batcher = Batcher(model, limits.batching)
        self.names = tf_serving.text_inputs(model)
        self.parsing = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="parse")
        self.in_flight = 0
        self.answered = 0

    async def health(self, request):
        from starlette.responses import JSONResponse

        late = self.batcher.wedged_for()
        if late:
            budget = self.limits.batching.call_budget_s
            message = f"a model call has run {late + budget:.0f} s, over its {budget:g} s"
            return JSONResponse({"status": "wedged", "error": message}, status_code=503)
        return JSONResponse({"status": "ready"})

    async def predict(self, request):
        from starlette.requests import ClientDisconnect
        from starlette.responses import Response

        if self.in_flight >= self.limits.max_in_flight:
            busy = "the server is at its in-flight limit: retry shortly"
            return _refusal(RequestError(503, busy, Retry_After=retry_after()))
        self.in_flight += 1
        try:
            return await self._predict(request)
        except RequestError as error:
            return _refusal(error)
        except ClientDisconnect:  # the client left mid-body: nobody to answer
            return Response(status_code=499)
        finally:
            self.in_flight -= 1

    async def _predict(self, request):
        from starlette.responses import JSONResponse

        limits = self.limits
        body = await read_body(request, limits)
        loop = asyncio.get_running_loop()
        parsed = await loop.run_in_executor(self.parsing, parse_request, body, self.names, limits.max_instances)
        signature, columns = parsed
        if signature not in SERVED_SIGNATURES:
            raise RequestError(400, f"signature '{signature}' is not served; use one of {list(SERVED_SIGNATURES)}")
        rows = len(next(iter(columns.values()), []))
        if rows == 0:
            return JSONResponse({"predictions": []})
        client = request.client.host if request.client else ""
        predictions = await self._answer(signature, columns, rows, client)
        self.answered += 1
        if self.log is not None:
            self.log.record(signature, columns, predictions)
        return JSONResponse({"predictions": predictions})

    async def _answer(self, signature: str, columns, rows: int, client: str):
        """The request's predictions from its batch, or the reason it has none as a RequestError: a short one for
        the client, the model's own words in the log."""
        import tensorflow as tf

        timeout = self.limits.request_timeout_s
        try:
            return await asyncio.wait_for(self.batcher.submit(signature, columns, rows, client), timeout)
        except NeverFits as error:
            raise RequestError(413, str(error)) from None
        except Saturated:
            raise RequestError(503, "the server's queue is full: retry shortly", Retry_After=retry_after()) from None
        except TimeoutError:
            raise RequestError(503, f"no answer within {timeout:g} s", Retry_After=retry_after()) from None
        except tf.errors.InvalidArgumentError as error:
            _log.warning("the model refused a request: %s", error.message)
            raise RequestError(400, "the model cannot take this request's inputs") from None
        except Exception:  # the model failed on this request alone (the batch's others were answered)
            _log.exception("the model failed on a request")
            raise RequestError(500, "the model failed on this request; the server's log has the details") from None

    def closing_line(self) -> str:
        """What the server says when it stops: how many requests its model calls answered."""
        batcher = self.batcher
        logged = f"; {self.log.closing_words()}" if self.log is not None else ""
        return (
            f"answered {self.answered} prediction requests in {batcher.calls} model calls (the largest "
            f"{batcher.largest_call} rows){logged}"
        )


def _refusal(error: RequestError):
    from starlette.responses import JSONResponse

    headers = {name.replace("_", "-"): value for name, value in error.headers.items()}
    return JSONResponse({"error": str(error)}, status_code=error.status, headers=headers)


async def _http_error(request, error):
    """Unknown routes and methods, answered in JSON too."""
    from starlette.responses import JSONResponse

    return JSONResponse({"error": f"{error.detail}: {request.method} {request.url.path}"}, error.status_code)


def build_app(model, limits: ServerLimits, health_route: str, predict_route: str, log: PredictionLog | None = None):
    """The Starlette app: health, and predict through the Batcher (each answer also to `log`); at shutdown it says
    what it answered."""
    import contextlib

    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.routing import Route

    routes = PredictionRoutes(model, limits, log)
    served = [
        Route(health_route, routes.health, methods=["GET"]),
        Route(predict_route, routes.predict, methods=["POST"]),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        if log is not None:
            log.close()
        print(routes.closing_line(), flush=True)

    return Starlette(routes=served, exception_handlers={HTTPException: _http_error}, lifespan=lifespan)


def raise_open_files_limit(wanted: int) -> None:
    """Lets the process hold `wanted` connections' descriptors (the soft limit up to the hard one)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def default_host() -> str:
    """Every interface inside a Vertex AI serving container (it sets AIP_HTTP_PORT), else the loopback."""
    return "0.0.0.0" if "AIP_HTTP_PORT" in os.environ else "127.0.0.1"


def serve(
    model_uri: str | None = None,
    port: int | None = None,
    host: str | None = None,
    limits: ServerLimits | None = None,
    log_settings: LogSettings | None = None,
    precision: ServingPrecision | None = None,
) -> None:
    """Loads the model (AIP_STORAGE_URI unless given) in `precision` (fp32 unless given), replays its warm-up
    requests, then serves until SIGTERM (in-flight requests are answered first); with `log_settings`, sampled
    answers go to a prediction log."""
    import uvicorn

    limits = limits or ServerLimits()
    model_uri = model_uri or os.environ.get("AIP_STORAGE_URI", "")
    if not model_uri:
        raise SystemExit("no model: set AIP_STORAGE_URI (Vertex AI does) or pass --model")
    # A base path in a bucket: its newest complete version is found there and only that one is copied down.
    version_uri = newest_complete_version(model_uri) if is_remote(model_uri) else model_uri
    version_dir, model = load_serving_model(localize(version_uri))
    precision = at_precision(model, precision or ServingPrecision("fp32", "the default"))
    replayed = tf_serving.replay_warmup_requests(model, str(version_dir))
    log = PredictionLog(log_settings, version_dir.name) if log_settings is not None else None
    health_route = os.environ.get("AIP_HEALTH_ROUTE", DEFAULT_HEALTH_ROUTE)
    predict_route = os.environ.get("AIP_PREDICT_ROUTE", DEFAULT_PREDICT_ROUTE)
    host, port = host or default_host(), port or int(os.environ.get("AIP_HTTP_PORT", DEFAULT_PORT))
    print(
        f"serving {version_dir} in {precision.describe()}, {replayed} warm-up requests replayed, on {host}:{port}: "
        f"POST {predict_route}, "
        f"GET {health_route}; batches of up to {limits.batching.max_batch} rows, "
        f"{limits.batching.batch_wait_s * 1e3:g} ms wait"
        + (f"; logging {log_settings.sample:.0%} of rows to {log.folder}" if log is not None else ""),
        flush=True,
    )
    raise_open_files_limit(limits.connections.max_connections + limits.max_in_flight + 256)  # + the model's files
    uvicorn.run(
        build_app(model, limits, health_route, predict_route, log),
        host=host,
        port=port,
        http=guarded_protocol(limits.connections),
        timeout_keep_alive=5,
        # Clients take turns by the connection's own address: X-Forwarded-For is anyone's to write (uvicorn trusts it
        # from loopback by default), and one client naming a new address each request took every turn.
        proxy_headers=False,
        timeout_graceful_shutdown=30,
        log_level="warning",
    )


def limits_from(values: dict[str, Any]) -> ServerLimits:
    """ServerLimits with the given fields of it, its batching and its connection limits (None: the default)."""
    given = {k: v for k, v in values.items() if v is not None}

    def of(cls):
        names = {field.name for field in dataclasses.fields(cls)}
        return {k: v for k, v in given.items() if k in names}

    known = {f.name for cls in (ServerLimits, BatchLimits, ConnectionLimits) for f in dataclasses.fields(cls)}
    if set(given) - known:
        raise TypeError(f"unknown server limits {sorted(set(given) - known)}")
    batching, connections = BatchLimits(**of(BatchLimits)), ConnectionLimits(**of(ConnectionLimits))
    return ServerLimits(**of(ServerLimits), batching=batching, connections=connections)
