"""Secret Manager on 127.0.0.1: a real gRPC server speaking `google.cloud.secretmanager.v1`'s
AccessSecretVersion, so the request is built and sent by the real client (its credentials' bearer token in the
call's metadata) and answered as the API answers: the payload, NOT_FOUND, or PERMISSION_DENIED for a caller
without access. Served with TLS (fake_vertex.loopback_certificate), as Google's endpoints are."""

from __future__ import annotations

import contextlib
import dataclasses
import threading

import grpc
from google.cloud import secretmanager_v1

from tests.fake_vertex import grpc_serving, unary_service

SERVICE = "google.cloud.secretmanager.v1.SecretManagerService"


@dataclasses.dataclass
class FakeSecretManager:
    versions: dict[str, bytes]  # projects/<p>/secrets/<s>/versions/<v> -> payload
    readers: set[str]  # bearer tokens (identities) allowed to read
    received: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (version asked, authorization)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def access(self, request: secretmanager_v1.AccessSecretVersionRequest, context):
        authorization = dict(context.invocation_metadata()).get("authorization", "")
        with self.lock:
            self.received.append((request.name, authorization))
        if authorization.removeprefix("Bearer ") not in self.readers:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, f"Permission denied on {request.name}")
        if request.name not in self.versions:
            context.abort(grpc.StatusCode.NOT_FOUND, f"Secret Version [{request.name}] not found.")
        payload = secretmanager_v1.SecretPayload(data=self.versions[request.name])
        return secretmanager_v1.AccessSecretVersionResponse(name=request.name, payload=payload)


@contextlib.contextmanager
def serve(fake: FakeSecretManager, tls: tuple[bytes, bytes]):
    """Serves `fake` with TLS on a free port of 127.0.0.1; yields host:port (the client's api_endpoint)."""
    request, response = secretmanager_v1.AccessSecretVersionRequest, secretmanager_v1.AccessSecretVersionResponse
    handler = unary_service(SERVICE, "AccessSecretVersion", fake.access, request, response)
    with grpc_serving([handler], tls) as address:
        yield address
