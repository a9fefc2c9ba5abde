"""Secret Manager on 127.0.0.1: a real gRPC server speaking `google.cloud.secretmanager.v1`'s
AccessSecretVersion, so the request is built and sent by the real client (its credentials' bearer token in the
call's metadata) and answered as the API answers: the payload, NOT_FOUND, or PERMISSION_DENIED for a caller
without access. Served with TLS (fake_vertex.loopback_certificate), as Google's endpoints are."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from concurrent import futures

import grpc
from google.cloud import secretmanager_v1

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
    method = grpc.unary_unary_rpc_method_handler(
        fake.access,
        request_deserializer=secretmanager_v1.AccessSecretVersionRequest.deserialize,
        response_serializer=secretmanager_v1.AccessSecretVersionResponse.serialize,
    )
    handler = grpc.method_handlers_generic_handler(SERVICE, {"AccessSecretVersion": method})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[handler])
    port = server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([tls]))
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(grace=None)
