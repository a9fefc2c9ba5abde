"""The pushed model behind Vertex AI's custom serving container contract: the pipeline image's default command.

Why our own server rather than a prebuilt one: the model is exported by TensorFlow 2.21 and its graph needs
three tensorflow_text ops; Vertex AI's prebuilt TensorFlow serving containers stop well below 2.21 (newer
graphs are not promised to load on older TensorFlow), and TFX's Vertex Pusher passes `Model.upload` nothing
but an image URI. This runs the training TensorFlow and tensorflow_text themselves and answers TF Serving's
REST body format (models/serving/tf_serving.py), so a request means the same at an endpoint and at TF Serving.

The HTTP side is Starlette on uvicorn (the maintained ASGI pair, both already in the stack), which shuts down
gracefully on SIGTERM, as Vertex stops replicas. Requests arriving together are answered by one model call
(dynamic batching, as TF Serving's --enable_batching does): the model runs on one thread, so N one-text
requests no longer wait for N calls. Batching must not share fate: every text is checked before it joins a
call, and a call that fails is split until only the request the model cannot take fails.
Every malformed body gets a 4xx with its reason: too large (413), too slow to arrive (408), not JSON, nested too
deep or not TF Serving's shape (400); when the queue is full, 503 with Retry-After. The health route never
waits behind predictions: connections whose request head does not arrive in time are closed, the oldest such
goes first when connections run out, and the in-flight cap applies to predictions only; it answers 503 only
when a model call has run past its budget (a wedged replica, which Vertex then replaces).

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
import resource
import time
from typing import Any

from models.errors import UserError
from models.hub.remote_folder import is_remote, localize
from models.serving import tf_serving
from models.serving.pushed_model import load_serving_model, newest_complete_version

DEFAULT_PORT = 8080
DEFAULT_HEALTH_ROUTE = "/health"
DEFAULT_PREDICT_ROUTE = "/predict"
BATCH_HEADER = "X-Batch-Rows"  # the rows of the model call that answered the request (shows batching at work)
_log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ServerLimits:
    max_body_bytes: int = 1_500_000  # Vertex AI's own online prediction request limit (1.5 MB)
    max_instances: int = 256  # per request
    max_batch: int = 64  # rows per model call
    # How long the first request of a call waits for others to join it. 0: none, a call takes what queued while
    # the previous one ran (under load that is a full batch; a lone client pays no wait).
    batch_wait_s: float = 0.0
    max_queued_rows: int = 1024  # rows waiting for the model beyond which a request gets a 503
    max_queued_bytes: int = 64_000_000  # text bytes waiting for the model beyond which a request gets a 503
    header_timeout_s: float = 10.0  # to receive a request's line and headers (a slow head is closed)
    read_timeout_s: float = 10.0  # to receive a whole body
    request_timeout_s: float = 60.0  # from a body's arrival to its answer
    # A model call running longer than this makes /health answer 503: the replica is wedged, not busy.
    call_budget_s: float = 120.0
    max_in_flight: int = 512  # predictions served at once (a 503 beyond); /health is never counted
    # Open connections beyond which the oldest one still waiting for its request head is closed.
    max_connections: int = 512


class Saturated(UserError, RuntimeError):
    """The queue holds max_queued_rows (or bytes) already: the client retries (503 + Retry-After)."""


@dataclasses.dataclass
class _Waiting:
    signature: str
    columns: dict[str, list[bytes]]
    rows: int
    answer: asyncio.Future


class Batcher:
    """Requests of one signature that queued while the model was busy (or within batch_wait_s) run as one model
    call of at most max_batch rows (a larger request runs alone), on one thread (TensorFlow parallelizes inside
    the call); each gets its own rows back. A call that fails is bisected, so only the request the model cannot
    take gets the error; a request that gave up (timed out, client gone) leaves the queue's counts at once and
    is never computed."""

    def __init__(self, model, limits: ServerLimits):
        self.model = model
        self.limits = limits
        self.queued_rows = 0
        self.queued_bytes = 0
        self.call_started: float | None = None  # time.monotonic() when the running model call began
        self._queue: asyncio.Queue[_Waiting] = asyncio.Queue()
        self._held: _Waiting | None = None
        self._thread = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="model")
        self._task: asyncio.Task | None = None

    def wedged_for(self) -> float:
        """Seconds the running model call has taken past call_budget_s (0: none running, or within it)."""
        started = self.call_started
        return 0.0 if started is None else max(0.0, time.monotonic() - started - self.limits.call_budget_s)

    async def submit(self, signature: str, columns: dict[str, list[bytes]], rows: int) -> tuple[list[dict], int]:
        """(this request's predictions, the rows of the call that made them)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run())
        size = sum(len(value) for values in columns.values() for value in values)
        if self.queued_rows + rows > self.limits.max_queued_rows or (
            self.queued_bytes + size > self.limits.max_queued_bytes and self.queued_rows
        ):
            raise Saturated
        waiting = _Waiting(signature, columns, rows, asyncio.get_running_loop().create_future())
        self.queued_rows += rows
        self.queued_bytes += size
        try:
            await self._queue.put(waiting)
            return await waiting.answer
        finally:
            self.queued_rows -= rows
            self.queued_bytes -= size
            waiting.columns = {}  # a request that gave up holds no texts while its entry waits to be skipped

    async def _next(self, timeout: float | None) -> _Waiting:
        """The held request, else the next queued one still waiting: waiting for it (timeout None), up to
        `timeout` seconds, or (timeout 0) only if one is there already."""
        while True:
            item = await self._next_any(timeout)
            if not item.answer.done():
                return item

    async def _next_any(self, timeout: float | None) -> _Waiting:
        if self._held is not None:
            held, self._held = self._held, None
            return held
        if timeout is None:
            return await self._queue.get()
        if timeout <= 0:
            try:
                return self._queue.get_nowait()
            except asyncio.QueueEmpty:
                raise TimeoutError from None
        return await asyncio.wait_for(self._queue.get(), timeout)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = [await self._next(None)]
            rows, deadline = batch[0].rows, loop.time() + self.limits.batch_wait_s
            # Requests that queued while the model ran join at once; batch_wait_s > 0 also waits for later ones.
            while rows < self.limits.max_batch:
                try:
                    item = await self._next(max(0.0, deadline - loop.time()))
                except TimeoutError:
                    break
                if item.signature != batch[0].signature or set(item.columns) != set(batch[0].columns):
                    self._held = item
                    break
                if rows + item.rows > self.limits.max_batch:
                    self._held = item
                    break
                batch.append(item)
                rows += item.rows
            live = [w for w in batch if not w.answer.done()]  # a request that timed out is not computed
            if not live:
                continue
            # The texts are taken here, on the loop: a request giving up meanwhile drops its own reference only.
            parts = [(w.columns, w.rows) for w in live]
            outcomes = await loop.run_in_executor(self._thread, self._answers, live[0].signature, parts)
            for waiting, outcome in zip(live, outcomes, strict=True):
                if waiting.answer.done():
                    continue
                if isinstance(outcome, BaseException):
                    waiting.answer.set_exception(outcome)
                else:
                    waiting.answer.set_result(outcome)

    def _answers(self, signature: str, parts: list[tuple[dict, int]]) -> list[tuple[list[dict], int] | Exception]:
        """Each request's (predictions, rows of its call), or the error the model raised on it: one call for all
        the parts ((columns, rows) per request); if that fails, each half on its own, down to the request that
        fails alone."""
        try:
            predictions = self._call(signature, parts)
        except Exception as error:
            if len(parts) == 1:
                return [error]
            half = len(parts) // 2
            return self._answers(signature, parts[:half]) + self._answers(signature, parts[half:])
        rows = sum(count for _, count in parts)
        return [(answer, rows) for answer in predictions]

    def _call(self, signature: str, parts: list[tuple[dict, int]]) -> list[list[dict]]:
        import tensorflow as tf

        names = list(parts[0][0])
        joined = {n: tf.constant([v for columns, _ in parts for v in columns[n]], dtype=tf.string) for n in names}
        self.call_started = time.monotonic()
        try:
            predictions = tf_serving.prediction_rows(self.model.signatures[signature](**joined))
        finally:
            self.call_started = None
        answers, start = [], 0
        for _, rows in parts:
            answers.append(predictions[start : start + rows])
            start += rows
        return answers


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
        await asyncio.wait_for(receive(), limits.read_timeout_s)
    except TimeoutError:
        if size > limits.max_body_bytes or int(declared or 0) > limits.max_body_bytes:
            raise RequestError(413, too_large, Connection="close") from None
        slow = f"the body did not arrive within {limits.read_timeout_s:g} s"
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


class PredictionRoutes:
    """The server's two routes: health, and predict through the Batcher, each request answered or refused alone."""

    def __init__(self, model, limits: ServerLimits):
        self.model, self.limits = model, limits
        self.batcher = Batcher(model, limits)
        self.names = tf_serving.text_inputs(model)
        self.parsing = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="parse")
        self.in_flight = 0

    async def health(self, request):
        from starlette.responses import JSONResponse

        late = self.batcher.wedged_for()
        if late:
            budget = self.limits.call_budget_s
            message = f"a model call has run {late + budget:.0f} s, over its {budget:g} s"
            return JSONResponse({"status": "wedged", "error": message}, status_code=503)
        return JSONResponse({"status": "ready"})

    async def predict(self, request):
        from starlette.requests import ClientDisconnect
        from starlette.responses import Response

        if self.in_flight >= self.limits.max_in_flight:
            return _refusal(RequestError(503, "the server is at its in-flight limit: retry shortly", Retry_After="1"))
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
        if signature not in self.model.signatures:
            raise RequestError(400, f"no signature '{signature}'; the model has {sorted(self.model.signatures)}")
        rows = len(next(iter(columns.values()), []))
        if rows == 0:
            return JSONResponse({"predictions": []})
        predictions, batch = await self._answer(signature, columns, rows)
        return JSONResponse({"predictions": predictions}, headers={BATCH_HEADER: str(batch)})

    async def _answer(self, signature: str, columns, rows: int):
        """The request's predictions from its batch, or the reason it has none as a RequestError."""
        import tensorflow as tf

        timeout = self.limits.request_timeout_s
        try:
            return await asyncio.wait_for(self.batcher.submit(signature, columns, rows), timeout)
        except Saturated:
            raise RequestError(503, "the server's queue is full: retry shortly", Retry_After="1") from None
        except TimeoutError:
            raise RequestError(503, f"no answer within {timeout:g} s", Retry_After="1") from None
        except tf.errors.InvalidArgumentError as error:
            raise RequestError(400, f"the model cannot take this request: {error.message}") from None
        except Exception as error:  # the model failed on this request alone (the batch's others were answered)
            _log.exception("the model failed on a request")
            raise RequestError(500, f"the model failed on this request: {type(error).__name__}: {error}") from None


def _refusal(error: RequestError):
    from starlette.responses import JSONResponse

    headers = {name.replace("_", "-"): value for name, value in error.headers.items()}
    return JSONResponse({"error": str(error)}, status_code=error.status, headers=headers)


async def _http_error(request, error):
    """Unknown routes and methods, answered in JSON too."""
    from starlette.responses import JSONResponse

    return JSONResponse({"error": f"{error.detail}: {request.method} {request.url.path}"}, error.status_code)


def build_app(model, limits: ServerLimits, health_route: str, predict_route: str):
    """The Starlette app: health, and predict through the Batcher."""
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.routing import Route

    routes = PredictionRoutes(model, limits)
    served = [
        Route(health_route, routes.health, methods=["GET"]),
        Route(predict_route, routes.predict, methods=["POST"]),
    ]
    return Starlette(routes=served, exception_handlers={HTTPException: _http_error})


def guarded_protocol(limits: ServerLimits):
    """uvicorn's h11 protocol, plus what it lacks to keep a replica reachable under idle or slow connections:
    a timeout on the request head (uvicorn times out idle keep-alive connections, not a request line whose
    headers never come) and, past max_connections, the oldest connection still waiting for its head closed to
    make room (uvicorn's limit_concurrency instead answers every request 503, health checks included)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    headless: dict[H11Protocol, asyncio.TimerHandle] = {}  # connections waiting for a request head, oldest first

    class GuardedProtocol(H11Protocol):
        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._await_head()
            if len(self.connections) > limits.max_connections:
                oldest = next(iter(headless), None)  # the new connection itself when all others are busy
                if oldest is not None:
                    oldest._drop_if_headless()

        def handle_events(self) -> None:
            super().handle_events()
            if self.conn.their_state is not h11.IDLE:
                self._head_arrived()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                self._await_head()

        def connection_lost(self, exc: Exception | None) -> None:
            self._head_arrived()
            super().connection_lost(exc)

        def _await_head(self) -> None:
            self._head_arrived()
            headless[self] = self.loop.call_later(limits.header_timeout_s, self._drop_if_headless)

        def _head_arrived(self) -> None:
            timer = headless.pop(self, None)
            if timer is not None:
                timer.cancel()

        def _drop_if_headless(self) -> None:
            self._head_arrived()
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

    return GuardedProtocol


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
    model_uri: str | None = None, port: int | None = None, host: str | None = None, limits: ServerLimits | None = None
) -> None:
    """Loads the model (AIP_STORAGE_URI unless given), replays its warm-up requests, then serves until SIGTERM
    (in-flight requests are answered first)."""
    import uvicorn

    limits = limits or ServerLimits()
    model_uri = model_uri or os.environ.get("AIP_STORAGE_URI", "")
    if not model_uri:
        raise SystemExit("no model: set AIP_STORAGE_URI (Vertex AI does) or pass --model")
    # A base path in a bucket: its newest complete version is found there and only that one is copied down.
    version_uri = newest_complete_version(model_uri) if is_remote(model_uri) else model_uri
    version_dir, model = load_serving_model(localize(version_uri))
    replayed = tf_serving.replay_warmup_requests(model, str(version_dir))
    health_route = os.environ.get("AIP_HEALTH_ROUTE", DEFAULT_HEALTH_ROUTE)
    predict_route = os.environ.get("AIP_PREDICT_ROUTE", DEFAULT_PREDICT_ROUTE)
    host, port = host or default_host(), port or int(os.environ.get("AIP_HTTP_PORT", DEFAULT_PORT))
    print(
        f"serving {version_dir} ({replayed} warm-up requests replayed) on {host}:{port}: POST {predict_route}, "
        f"GET {health_route}; batches of up to {limits.max_batch} rows, {limits.batch_wait_s * 1e3:g} ms wait",
        flush=True,
    )
    raise_open_files_limit(limits.max_connections + limits.max_in_flight + 256)  # + the model's own files
    uvicorn.run(
        build_app(model, limits, health_route, predict_route),
        host=host,
        port=port,
        http=guarded_protocol(limits),
        timeout_keep_alive=5,
        timeout_graceful_shutdown=30,
        log_level="warning",
    )


def limits_from(values: dict[str, Any]) -> ServerLimits:
    """ServerLimits with the given fields (None: the default)."""
    return ServerLimits(**{k: v for k, v in values.items() if v is not None})
