"""uvicorn's h11 protocol, plus what it lacks to keep a replica reachable whatever its connections do.

- One deadline for each request to arrive whole, on every route: its head within header_timeout_s of the connection
  turning idle, its body within read_timeout_s (+ a second, so a route reading it answers 408 first) of its head.
  uvicorn times out neither, and a route that never reads a declared body (GET /health, a 404) left the connection
  open for ever: 512 such connections kept every newcomer out.
- A response sent before its request's body was read closes the connection (the rest of the body is never waited
  for).
- Past max_connections, the oldest connection still waiting for a request head is closed to make room, else the
  oldest still waiting for a body; never the newcomer, and never one whose request is being answered (uvicorn's
  limit_concurrency instead answers every request 503, health checks included).
- Answers must leave too: once the answers waiting to be sent pass the transport's high-water mark (the client
  reads slower than it asks), the connection has write_timeout_s to take them, then it is aborted with what was
  queued. A whole request had no deadline before: 512 readers that pipelined /health and never read held the
  server 110 s, 100 s of CPU and 188 MB of send queue.
- At most max_requests are answered on one connection, then it closes after the last answer (nginx's
  keepalive_requests): pipelined requests a reader never takes cost at most that many answers each.
- A request that arrives takes its turn at once; one pipelined behind an answer waits in one queue for the whole
  server, of which PIPELINED_PER_TURN start each turn of the event loop. uvicorn started each connection's next
  pipelined request as soon as its answer was written, so 500 connections pipelining /health made every loop turn
  answer 500 requests (0.43 s on a 157 GFLOP/s machine) and a health probe waited three turns.
- Answers are held back past WRITE_HIGH_WATER bytes that the kernel would not take (asyncio's default is 64 KiB):
  a client that does not read is paused after a few KB of answers, not ~500 of them.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

BODY_GRACE_S = 1.0  # past read_timeout_s: a route reading the body answers its 408 before the guard closes
PIPELINED_PER_TURN = 4  # pipelined requests started in one turn of the event loop, over all connections
WRITE_HIGH_WATER = 4096  # bytes of answers the kernel has not taken, past which a connection's writer waits


@dataclasses.dataclass(frozen=True)
class ConnectionLimits:
    header_timeout_s: float = 10.0  # to receive a request's line and headers
    read_timeout_s: float = 10.0  # to receive a whole body
    # Open connections beyond which the oldest one waiting for its request (head first) is closed.
    max_connections: int = 512
    write_timeout_s: float = 10.0  # for a client to take answers queued past the transport's high-water mark
    max_requests: int = 1_000  # answered on one connection, which then closes (a client reconnects)


HEAD, BODY = "head", "body"
_PHASES = {h11.IDLE: HEAD, h11.SEND_BODY: BODY}  # what a connection waits for in each of h11's client states


class GuardedProtocol(H11Protocol):
    """The guard over one connection; `limits` and `waiting` (the connections waiting for a request, oldest deadline
    first) are the server's, set by guarded_protocol."""

    limits: ConnectionLimits = ConnectionLimits()
    waiting: dict[GuardedProtocol, asyncio.TimerHandle]
    pipelined: collections.deque[GuardedProtocol]  # connections whose next request is already here, in arrival order
    _phase: str | None = None
    _write_deadline: asyncio.TimerHandle | None = None
    _counted_cycle: object = None
    _requests = 0

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        self._follow_request()
        if len(self.connections) > self.limits.max_connections:
            self._make_room()

    def handle_events(self) -> None:
        super().handle_events()
        if self.cycle is not None and self.cycle is not self._counted_cycle:  # a request has begun
            self._counted_cycle, self._requests = self.cycle, self._requests + 1
            if self._requests >= self.limits.max_requests:
                self.cycle.keep_alive = False  # its answer is the connection's last
        self._follow_request()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_deadline is None:
            self._write_deadline = self.loop.call_later(self.limits.write_timeout_s, self._abort_unread)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._cancel_write_deadline()

    def _abort_unread(self) -> None:
        """The client did not take its answers in time: the connection goes with what is queued for it (a close
        would wait for the queue to drain)."""
        self._write_deadline = None
        self._disarm()
        self.transport.abort()

    def _cancel_write_deadline(self) -> None:
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None

    def on_response_complete(self) -> None:
        """uvicorn's, except that a next request already received (pipelined) joins the server's queue instead of
        starting now."""
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        if self.conn.their_state is h11.SEND_BODY:  # answered before its body was read
            self._drop()
            return
        self._unset_keepalive_if_required()
        self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self.timeout_keep_alive_handler)
        if self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE:
            self.conn.start_next_cycle()
            if self.conn.trailing_data[0]:  # the next request is here already
                self._queue_pipelined()
                return
        self.flow.resume_reading()
        self._follow_request()

    def _queue_pipelined(self) -> None:
        if not self.pipelined:
            self.loop.call_soon(self._start_pipelined, self.pipelined)
        self.pipelined.append(self)

    @staticmethod
    def _start_pipelined(queue: collections.deque[GuardedProtocol]) -> None:
        """One turn's share of the queue; the rest waits for the next turn, behind what arrives meanwhile."""
        for _ in range(min(PIPELINED_PER_TURN, len(queue))):
            connection = queue.popleft()
            if not connection.transport.is_closing():
                connection.flow.resume_reading()
                connection.handle_events()
        if queue:
            queue[0].loop.call_soon(GuardedProtocol._start_pipelined, queue)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._cancel_write_deadline()
        super().connection_lost(exc)

    def _follow_request(self) -> None:
        """The deadline of the part of the request awaited now: armed when the head (or the body) starts to be
        awaited, kept while it arrives, dropped once the request is whole."""
        phase = _PHASES.get(self.conn.their_state)
        if phase == self._phase:
            return
        self._disarm()
        if phase is not None:
            timeout = self.limits.header_timeout_s if phase == HEAD else self.limits.read_timeout_s + BODY_GRACE_S
            self.waiting[self] = self.loop.call_later(timeout, self._drop_if_waiting)
            self._phase = phase

    def _disarm(self) -> None:
        self._phase = None
        timer = self.waiting.pop(self, None)
        if timer is not None:
            timer.cancel()

    def _drop_if_waiting(self) -> None:
        if _PHASES.get(self.conn.their_state) is not None:
            self._drop()
        else:
            self._disarm()

    def _drop(self) -> None:
        self._disarm()
        if not self.transport.is_closing():
            self.transport.close()

    def _make_room(self) -> None:
        others = [c for c in self.waiting if c is not self and not c.transport.is_closing()]
        victim = next((c for c in others if c._phase == HEAD), None) or next(iter(others), None)
        if victim is not None:
            victim._drop()


def guarded_protocol(limits: ConnectionLimits) -> type[GuardedProtocol]:
    """The protocol class to give uvicorn (`http=`): one server's limits and its own table of waiting connections."""
    shared = {"limits": limits, "waiting": {}, "pipelined": collections.deque()}
    return type("GuardedProtocol", (GuardedProtocol,), shared)
