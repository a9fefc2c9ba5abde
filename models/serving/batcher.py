"""Dynamic batching for the prediction server, as TF Serving's --enable_batching does it: requests that queue while
the model is busy share its next call, on one thread (TensorFlow parallelizes inside the call).

Batching must not share fate or cost: every text is checked before it joins a call; a call that fails is bisected
until only the request the model cannot take fails; a call is bounded in bytes as well as rows (a large request's
rows go in several calls), so no set of requests makes one call that takes the replica's memory; clients take
turns (each client's requests in order), so one client's many uploads do not hold everyone else's single request
behind their whole length.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import dataclasses
import time

from models.errors import UserError
from models.serving import tf_serving


@dataclasses.dataclass(frozen=True)
class BatchLimits:
    max_batch: int = 64  # rows per model call
    max_call_bytes: int = 4_000_000  # text bytes per model call (a single row over it runs alone)
    # How long the first request of a call waits for others to join it. 0: none, a call takes what queued while
    # the previous one ran (under load that is a full batch; a lone client pays no wait).
    batch_wait_s: float = 0.0
    max_queued_rows: int = 1024  # rows waiting for the model beyond which a request gets a 503
    max_queued_bytes: int = 64_000_000  # text bytes waiting for the model beyond which a request gets a 503
    # A model call running longer than this makes /health answer 503: the replica is wedged, not busy.
    call_budget_s: float = 120.0


class Saturated(UserError, RuntimeError):
    """The queue holds max_queued_rows (or bytes) already: the client retries (503 + Retry-After)."""


class NeverFits(UserError, ValueError):
    """A request larger than the whole queue: no retry can succeed (413)."""


@dataclasses.dataclass
class _Waiting:
    signature: str
    columns: dict[str, list[bytes]]
    rows: int
    size: int  # text bytes
    answer: asyncio.Future


class FairQueue:
    """Waiting requests per client, taken in turn (round robin over the clients, each client's own in order).
    Hand-written because asyncio's queues are first in, first out over everyone."""

    def __init__(self):
        self._by_client: dict[str, collections.deque[_Waiting]] = {}  # insertion order is the turn order
        self._ready = asyncio.Event()

    def put(self, client: str, item: _Waiting) -> None:
        self._by_client.setdefault(client, collections.deque()).append(item)
        self._ready.set()

    def get_nowait(self) -> _Waiting:
        if not self._by_client:
            raise asyncio.QueueEmpty
        client = next(iter(self._by_client))
        queue = self._by_client.pop(client)
        item = queue.popleft()
        if queue:
            self._by_client[client] = queue  # its next request waits for the other clients' turns
        return item

    async def get(self) -> _Waiting:
        while not self._by_client:
            self._ready.clear()
            await self._ready.wait()
        return self.get_nowait()


class Batcher:
    """Requests of one signature taken in turn from the FairQueue run as one model call of at most max_batch rows
    and max_call_bytes (a larger request runs alone, in calls of that size); each gets its own rows back. A call
    that fails is bisected, so only the request the model cannot take gets the error; a request that gave up
    (timed out, client gone) leaves the queue's counts at once and is never computed."""

    def __init__(self, model, limits: BatchLimits):
        self.model = model
        self.limits = limits
        self.queued_rows = 0
        self.queued_bytes = 0
        self.calls = 0  # model calls made, and the rows of the largest: what the server's closing line reports
        self.largest_call = 0
        self.call_started: float | None = None  # time.monotonic() when the running model call began
        self._queue: FairQueue | None = None
        self._held: _Waiting | None = None
        self._thread = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="model")
        self._task: asyncio.Task | None = None

    def wedged_for(self) -> float:
        """Seconds the running model call has taken past call_budget_s (0: none running, or within it)."""
        started = self.call_started
        return 0.0 if started is None else max(0.0, time.monotonic() - started - self.limits.call_budget_s)

    def check_fits(self, rows: int, size: int) -> None:
        """NeverFits when a request is larger than the whole queue."""
        limits = self.limits
        if rows > limits.max_queued_rows or size > limits.max_queued_bytes:
            raise NeverFits(
                f"the request's {rows} rows and {size:,} bytes of text are more than the server ever queues "
                f"({limits.max_queued_rows} rows, {limits.max_queued_bytes:,} bytes): send it in smaller requests"
            )

    async def submit(self, signature: str, columns: dict[str, list[bytes]], rows: int, client: str = "") -> list[dict]:
        """This request's predictions, once its turn and its call came."""
        if self._task is None:
            self._queue = FairQueue()
            self._task = asyncio.create_task(self._run())
        size = sum(len(value) for values in columns.values() for value in values)
        self.check_fits(rows, size)
        if self.queued_rows + rows > self.limits.max_queued_rows or (
            self.queued_bytes + size > self.limits.max_queued_bytes and self.queued_rows
        ):
            raise Saturated
        waiting = _Waiting(signature, columns, rows, size, asyncio.get_running_loop().create_future())
        self.queued_rows += rows
        self.queued_bytes += size
        try:
            self._queue.put(client, waiting)
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

    def _joins(self, batch: list[_Waiting], item: _Waiting) -> bool:
        first = batch[0]
        return (
            item.signature == first.signature
            and set(item.columns) == set(first.columns)
            and sum(w.rows for w in batch) + item.rows <= self.limits.max_batch
            and sum(w.size for w in batch) + item.size <= self.limits.max_call_bytes
        )

    async def _gather(self) -> list[_Waiting]:
        """The next call's requests: the next in turn, then those that queued while the model ran (and, with
        batch_wait_s > 0, those arriving within it) while they fit its rows and bytes."""
        loop = asyncio.get_running_loop()
        batch = [await self._next(None)]
        deadline = loop.time() + self.limits.batch_wait_s
        while sum(w.rows for w in batch) < self.limits.max_batch:
            try:
                item = await self._next(max(0.0, deadline - loop.time()))
            except TimeoutError:
                break
            if not self._joins(batch, item):
                self._held = item
                break
            batch.append(item)
        return batch

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            live = [w for w in await self._gather() if not w.answer.done()]  # a request that timed out is skipped
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

    def _answers(self, signature: str, parts: list[tuple[dict, int]]) -> list[list[dict] | Exception]:
        """Each request's predictions, or the error the model raised on it: one call for all the parts ((columns,
        rows) per request); if that fails, each half on its own, down to the request that fails alone."""
        try:
            return self._call(signature, parts)
        except Exception as error:
            if len(parts) == 1:
                return [error]
            half = len(parts) // 2
            return self._answers(signature, parts[:half]) + self._answers(signature, parts[half:])

    def _call(self, signature: str, parts: list[tuple[dict, int]]) -> list[list[dict]]:
        names = list(parts[0][0])
        joined = {n: [v for columns, _ in parts for v in columns[n]] for n in names}
        predictions: list[dict] = []
        for rows in _row_ranges(joined, self.limits.max_call_bytes):
            predictions += self._call_rows(signature, {n: values[rows] for n, values in joined.items()})
        answers, start = [], 0
        for _, rows in parts:
            answers.append(predictions[start : start + rows])
            start += rows
        return answers

    def _call_rows(self, signature: str, columns: dict[str, list[bytes]]) -> list[dict]:
        import tensorflow as tf

        tensors = {n: tf.constant(values, dtype=tf.string) for n, values in columns.items()}
        self.call_started = time.monotonic()
        try:
            outputs = self.model.signatures[signature](**tensors)
        finally:
            self.call_started = None
        self.calls += 1
        self.largest_call = max(self.largest_call, len(next(iter(columns.values()))))
        return tf_serving.prediction_rows(outputs)


def _row_ranges(columns: dict[str, list[bytes]], max_bytes: int) -> list[slice]:
    """Consecutive rows in slices of at most max_bytes of text (at least one row each)."""
    sizes = [sum(len(values[i]) for values in columns.values()) for i in range(len(next(iter(columns.values()))))]
    ranges, start, total = [], 0, 0
    for index, size in enumerate(sizes):
        if index > start and total + size > max_bytes:
            ranges.append(slice(start, index))
            start, total = index, 0
        total += size
    ranges.append(slice(start, len(sizes)))
    return ranges
