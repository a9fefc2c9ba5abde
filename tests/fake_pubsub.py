"""Pub/Sub's Publisher service on 127.0.0.1: a real gRPC server speaking `google.pubsub.v1.Publisher/Publish`,
reached by the real client through PUBSUB_EMULATOR_HOST (the client library's own emulator setting, plaintext
like the emulator). It records each request as the API's proto, parsed from the wire, and answers with ids;
a topic not in `topics` gets NOT_FOUND, as from the service."""

from __future__ import annotations

import contextlib
import dataclasses
import threading

import grpc
from google import pubsub_v1

from tests.fake_vertex import grpc_serving, unary_service

SERVICE = "google.pubsub.v1.Publisher"


@dataclasses.dataclass
class FakePubSub:
    topics: set[str]  # projects/<p>/topics/<t>
    received: list[pubsub_v1.PublishRequest] = dataclasses.field(default_factory=list)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def publish(self, request: pubsub_v1.PublishRequest, context):
        if request.topic not in self.topics:
            context.abort(grpc.StatusCode.NOT_FOUND, "Topic not found")
        with self.lock:
            self.received.append(request)
            first = sum(len(r.messages) for r in self.received)
        return pubsub_v1.PublishResponse(message_ids=[str(first + i) for i in range(len(request.messages))])


@contextlib.contextmanager
def serve(fake: FakePubSub):
    """Serves `fake` on a free port of 127.0.0.1; yields host:port for PUBSUB_EMULATOR_HOST."""
    handler = unary_service(SERVICE, "Publish", fake.publish, pubsub_v1.PublishRequest, pubsub_v1.PublishResponse)
    with grpc_serving([handler]) as address:
        yield address
