"""A fake of the Vertex AI API on 127.0.0.1: a real gRPC server speaking the `google.cloud.aiplatform.v1`
services, so requests are built and sent by the real client code (aiplatform.PipelineJob, the GAPIC clients)
and arrive here as the API's protos, parsed from the wire.

It keeps pipeline jobs and schedules of one region in memory, refuses a second job with the same id
(ALREADY_EXISTS, as Vertex does) and records every request it receives. The only stand-in is the channel:
Google's endpoints need TLS and credentials, this one is plaintext on the loopback (`plaintext_channels`).
`aiplatform.PipelineJob.submit` also checks the pipeline root's bucket through Cloud Storage's JSON API:
`serve_storage` answers that on 127.0.0.1 (the storage client's own emulator setting points it there).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import http.server
import ipaddress
import json
import threading
from concurrent import futures

import grpc
from google.cloud import aiplatform_v1
from google.longrunning import operations_pb2
from google.protobuf import any_pb2, empty_pb2

SERVICE = "google.cloud.aiplatform.v1"


@dataclasses.dataclass
class Received:
    method: str  # e.g. "PipelineService/CreatePipelineJob"
    request: object  # the aiplatform_v1 request, parsed from the bytes that arrived
    authorization: str = ""  # the call's `authorization` metadata (credentials' bearer token)


def _done(operation_name: str, response) -> operations_pb2.Operation:
    """A long-running operation that has already finished with `response` (a proto-plus message)."""
    packed = any_pb2.Any()
    packed.Pack(type(response).pb(response))
    return operations_pb2.Operation(name=operation_name, done=True, response=packed)


def _find(resources, name: str, context):
    for resource in resources:
        if resource.name == name.split("@")[0]:  # a model name may carry @version
            return resource
    context.abort(grpc.StatusCode.NOT_FOUND, f"{name} not found")


def _stored_job(job, parent: str, collection: str, jobs: list, state):
    """A created job as Vertex returns it: named after its place in `jobs`, in `state`, kept for later reads."""
    job.name = f"{parent}/{collection}/{len(jobs) + 1}"
    job.state = state
    jobs.append(job)
    return job


class FakeVertex:
    """PipelineService, ScheduleService, EndpointService, ModelService, JobService's CustomJobs and batch
    prediction jobs, and the
    MetadataService contexts that Vertex AI Experiments are made of, of one region, in memory."""

    def __init__(self, jobs=()):
        self.jobs = list(jobs)
        self.schedules = []
        self.endpoints: list[aiplatform_v1.Endpoint] = []
        self.models: list[aiplatform_v1.Model] = []
        self.contexts: list[aiplatform_v1.Context] = []
        self.custom_jobs: list[aiplatform_v1.CustomJob] = []
        self.batch_jobs: list[aiplatform_v1.BatchPredictionJob] = []
        self._deployments = 0
        self.received: list[Received] = []
        self._lock = threading.Lock()

    def requests(self, method: str | None = None) -> list:
        """The requests received, oldest first; only those of `method` ("PipelineService/CreatePipelineJob")."""
        return [r.request for r in self.received if method in (None, r.method)]

    # PipelineService
    def create_pipeline_job(self, request, context):
        name = f"{request.parent}/pipelineJobs/{request.pipeline_job_id}"
        if any(job.name == name for job in self.jobs):
            context.abort(grpc.StatusCode.ALREADY_EXISTS, f"PipelineJob {name} already exists")
        job = aiplatform_v1.PipelineJob(request.pipeline_job)
        job.name = name
        job.state = aiplatform_v1.PipelineState.PIPELINE_STATE_PENDING
        # Vertex records every run as a system.PipelineRun context of the region's default metadata store.
        store = f"{request.parent}/metadataStores/default"
        run_context = aiplatform_v1.Context(
            name=f"{store}/contexts/{request.pipeline_job_id}", schema_title="system.PipelineRun"
        )
        self.contexts.append(run_context)
        job.job_detail = aiplatform_v1.PipelineJobDetail(pipeline_run_context=run_context)
        self.jobs.append(job)
        return job

    def get_pipeline_job(self, request, context):
        return _find(self.jobs, request.name, context)

    def cancel_pipeline_job(self, request, context):
        job = _find(self.jobs, request.name, context)
        if job.state not in (
            aiplatform_v1.PipelineState.PIPELINE_STATE_PENDING,
            aiplatform_v1.PipelineState.PIPELINE_STATE_RUNNING,
        ):
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"{request.name} is in state {job.state.name}")
        job.state = aiplatform_v1.PipelineState.PIPELINE_STATE_CANCELLED  # Vertex passes through CANCELLING
        return empty_pb2.Empty()

    def delete_pipeline_job(self, request, context):
        job = _find(self.jobs, request.name, context)
        if job.state in (
            aiplatform_v1.PipelineState.PIPELINE_STATE_PENDING,
            aiplatform_v1.PipelineState.PIPELINE_STATE_RUNNING,
        ):
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"{request.name} is still running: cancel it first")
        self.jobs.remove(job)
        packed = any_pb2.Any()
        packed.Pack(empty_pb2.Empty())  # a plain protobuf message, not proto-plus: packed as it is
        return operations_pb2.Operation(name=f"{request.name}/operations/1", done=True, response=packed)

    def list_pipeline_jobs(self, request, context):
        """Filters `labels.KEY="v"` or `pipeline_name="v"` (the spec's pipelineInfo.name); `create_time desc`
        (Vertex's default order too) lists the newest created first, as the fake's jobs are kept in order."""
        key, _, value = request.filter.partition("=")
        value = value.strip('"')
        if key == "pipeline_name":
            jobs = [job for job in self.jobs if job.pipeline_spec.get("pipelineInfo", {}).get("name") == value]
        else:
            jobs = [job for job in self.jobs if job.labels.get(key.removeprefix("labels.")) == value]
        if request.order_by in ("", "create_time desc"):
            jobs = jobs[::-1]
        return aiplatform_v1.ListPipelineJobsResponse(pipeline_jobs=jobs)

    # MetadataService (the default store exists; contexts as Experiments use them)
    def get_metadata_store(self, request, context):
        return aiplatform_v1.MetadataStore(name=request.name)

    def get_context(self, request, context):
        return _find(self.contexts, request.name, context)

    def create_context(self, request, context):
        created = aiplatform_v1.Context(request.context)
        created.name = f"{request.parent}/contexts/{request.context_id}"
        if any(c.name == created.name for c in self.contexts):
            context.abort(grpc.StatusCode.ALREADY_EXISTS, f"Context {created.name} already exists")
        self.contexts.append(created)
        return created

    def add_context_children(self, request, context):
        parent = _find(self.contexts, request.context, context)
        for child in request.child_contexts:
            _find(self.contexts, child, context).parent_contexts.append(parent.name)
        return aiplatform_v1.AddContextChildrenResponse()

    # ScheduleService
    def create_schedule(self, request, context):
        schedule = aiplatform_v1.Schedule(request.schedule)
        schedule.name = f"{request.parent}/schedules/{len(self.schedules) + 1}"
        schedule.state = aiplatform_v1.Schedule.State.ACTIVE
        self.schedules.append(schedule)
        return schedule

    def list_schedules(self, request, context):
        return aiplatform_v1.ListSchedulesResponse(schedules=self.schedules)

    def pause_schedule(self, request, context):
        return empty_pb2.Empty()

    def resume_schedule(self, request, context):
        return empty_pb2.Empty()

    def delete_schedule(self, request, context):
        self.schedules = [s for s in self.schedules if s.name != request.name]
        return operations_pb2.Operation(name=f"{request.name}/operations/1", done=True)

    # EndpointService
    def list_endpoints(self, request, context):
        wanted = request.filter.removeprefix("display_name=").strip('"')
        return aiplatform_v1.ListEndpointsResponse(
            endpoints=[e for e in self.endpoints if not request.filter or e.display_name == wanted]
        )

    def create_endpoint(self, request, context):
        endpoint = aiplatform_v1.Endpoint(request.endpoint)
        endpoint.name = f"{request.parent}/endpoints/{len(self.endpoints) + 1}"
        self.endpoints.append(endpoint)
        return _done(f"{endpoint.name}/operations/create", endpoint)

    def get_endpoint(self, request, context):
        return _find(self.endpoints, request.name, context)

    def deploy_model(self, request, context):
        endpoint = _find(self.endpoints, request.endpoint, context)
        deployed = aiplatform_v1.DeployedModel(request.deployed_model)
        self._deployments += 1
        deployed.id = str(self._deployments)
        deployed.create_time = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(
            minutes=self._deployments
        )
        endpoint.deployed_models.append(deployed)
        # "0" in a traffic split names the model being deployed (the API's convention)
        split = {deployed.id if key == "0" else key: value for key, value in request.traffic_split.items()}
        endpoint.traffic_split.clear()
        endpoint.traffic_split.update(split)
        return _done(
            f"{endpoint.name}/operations/deploy-{deployed.id}",
            aiplatform_v1.DeployModelResponse(deployed_model=deployed),
        )

    def update_endpoint(self, request, context):
        """The fields the mask names (the traffic split, request-response logging); a traffic split must name
        deployed models and add up to 100, as Vertex checks."""
        endpoint = _find(self.endpoints, request.endpoint.name, context)
        if "traffic_split" in request.update_mask.paths:
            split = dict(request.endpoint.traffic_split)
            deployed = {m.id for m in endpoint.deployed_models}
            if sum(split.values()) != 100 or not set(split) <= deployed:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"bad traffic split {split} for {sorted(deployed)}")
            endpoint.traffic_split.clear()
            endpoint.traffic_split.update(split)
        if "predict_request_response_logging_config" in request.update_mask.paths:
            endpoint.predict_request_response_logging_config = request.endpoint.predict_request_response_logging_config
        return endpoint

    def undeploy_model(self, request, context):
        endpoint = _find(self.endpoints, request.endpoint, context)
        kept = [m for m in endpoint.deployed_models if m.id != request.deployed_model_id]
        if len(kept) == len(endpoint.deployed_models):
            context.abort(grpc.StatusCode.NOT_FOUND, f"no deployed model {request.deployed_model_id}")
        del endpoint.deployed_models[:]
        endpoint.deployed_models.extend(kept)
        split = dict(request.traffic_split) or {
            k: v for k, v in endpoint.traffic_split.items() if k != request.deployed_model_id
        }
        endpoint.traffic_split.clear()
        endpoint.traffic_split.update(split)
        return _done(
            f"{endpoint.name}/operations/undeploy-{request.deployed_model_id}", aiplatform_v1.UndeployModelResponse()
        )

    # JobService: a CustomJob finishes as soon as it is created (the launcher's polling ends at once)
    def create_custom_job(self, request, context):
        job = aiplatform_v1.CustomJob(request.custom_job)
        return _stored_job(
            job, request.parent, "customJobs", self.custom_jobs, aiplatform_v1.JobState.JOB_STATE_SUCCEEDED
        )

    def get_custom_job(self, request, context):
        return _find(self.custom_jobs, request.name, context)

    # JobService: a batch prediction job is accepted and left pending (the client returns once it exists)
    def create_batch_prediction_job(self, request, context):
        job = aiplatform_v1.BatchPredictionJob(request.batch_prediction_job)
        return _stored_job(
            job, request.parent, "batchPredictionJobs", self.batch_jobs, aiplatform_v1.JobState.JOB_STATE_PENDING
        )

    def get_batch_prediction_job(self, request, context):
        return _find(self.batch_jobs, request.name, context)

    # ModelService
    def upload_model(self, request, context):
        model = aiplatform_v1.Model(request.model)
        model.name = f"{request.parent}/models/{len(self.models) + 1}"
        model.version_id = "1"
        # What Vertex answers for a model with a serving container; aiplatform reads it to pick the resources.
        model.supported_deployment_resources_types = [aiplatform_v1.Model.DeploymentResourcesType.DEDICATED_RESOURCES]
        self.models.append(model)
        response = aiplatform_v1.UploadModelResponse(model=model.name, model_version_id="1")
        return _done(f"{model.name}/operations/upload", response)

    def get_model(self, request, context):
        return _find(self.models, request.name, context)


# (service, method, request type, response type); FakeVertex implements each method under its snake_case name
v1 = aiplatform_v1
_METHODS = [
    ("PipelineService", "CreatePipelineJob", v1.CreatePipelineJobRequest, v1.PipelineJob),
    ("PipelineService", "GetPipelineJob", v1.GetPipelineJobRequest, v1.PipelineJob),
    ("PipelineService", "ListPipelineJobs", v1.ListPipelineJobsRequest, v1.ListPipelineJobsResponse),
    ("PipelineService", "CancelPipelineJob", v1.CancelPipelineJobRequest, empty_pb2.Empty),
    ("PipelineService", "DeletePipelineJob", v1.DeletePipelineJobRequest, operations_pb2.Operation),
    ("MetadataService", "GetMetadataStore", v1.GetMetadataStoreRequest, v1.MetadataStore),
    ("MetadataService", "GetContext", v1.GetContextRequest, v1.Context),
    ("MetadataService", "CreateContext", v1.CreateContextRequest, v1.Context),
    ("MetadataService", "AddContextChildren", v1.AddContextChildrenRequest, v1.AddContextChildrenResponse),
    ("ScheduleService", "CreateSchedule", v1.CreateScheduleRequest, v1.Schedule),
    ("ScheduleService", "ListSchedules", v1.ListSchedulesRequest, v1.ListSchedulesResponse),
    ("ScheduleService", "PauseSchedule", v1.PauseScheduleRequest, empty_pb2.Empty),
    ("ScheduleService", "ResumeSchedule", v1.ResumeScheduleRequest, empty_pb2.Empty),
    ("ScheduleService", "DeleteSchedule", v1.DeleteScheduleRequest, operations_pb2.Operation),
    ("EndpointService", "ListEndpoints", v1.ListEndpointsRequest, v1.ListEndpointsResponse),
    ("EndpointService", "CreateEndpoint", v1.CreateEndpointRequest, operations_pb2.Operation),
    ("EndpointService", "GetEndpoint", v1.GetEndpointRequest, v1.Endpoint),
    ("EndpointService", "UpdateEndpoint", v1.UpdateEndpointRequest, v1.Endpoint),
    ("EndpointService", "DeployModel", v1.DeployModelRequest, operations_pb2.Operation),
    ("EndpointService", "UndeployModel", v1.UndeployModelRequest, operations_pb2.Operation),
    ("ModelService", "UploadModel", v1.UploadModelRequest, operations_pb2.Operation),
    ("ModelService", "GetModel", v1.GetModelRequest, v1.Model),
    ("JobService", "CreateCustomJob", v1.CreateCustomJobRequest, v1.CustomJob),
    ("JobService", "GetCustomJob", v1.GetCustomJobRequest, v1.CustomJob),
    ("JobService", "CreateBatchPredictionJob", v1.CreateBatchPredictionJobRequest, v1.BatchPredictionJob),
    ("JobService", "GetBatchPredictionJob", v1.GetBatchPredictionJobRequest, v1.BatchPredictionJob),
]  # fmt: skip


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")


def _serializer(response_type):
    if hasattr(response_type, "SerializeToString"):  # a plain protobuf message class
        return lambda message: message.SerializeToString()
    return response_type.serialize  # a proto-plus message class


def _handlers(fake: FakeVertex):
    by_service: dict[str, dict] = {}
    for service, method, request_type, response_type in _METHODS:
        attribute = _snake(method)

        # Looked up at each call, so a test can replace one method of a running fake.
        def handle(request, context, name=attribute, key=f"{service}/{method}"):
            with fake._lock:
                authorization = dict(context.invocation_metadata()).get("authorization", "")
                fake.received.append(Received(key, request, authorization))
                return getattr(fake, name)(request, context)

        by_service.setdefault(service, {})[method] = grpc.unary_unary_rpc_method_handler(
            handle, request_deserializer=request_type.deserialize, response_serializer=_serializer(response_type)
        )
    return [grpc.method_handlers_generic_handler(f"{SERVICE}.{s}", methods) for s, methods in by_service.items()]


def loopback_certificate(directory) -> tuple[bytes, bytes]:
    """A self-signed TLS certificate for 127.0.0.1 (key PEM, certificate PEM), also written to
    `directory`/ca.pem: a client trusts it through GRPC_DEFAULT_SSL_ROOTS_FILE_PATH, as it trusts Google's."""
    from pathlib import Path

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake-vertex")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=2))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    certificate_pem = certificate.public_bytes(serialization.Encoding.PEM)
    Path(directory, "ca.pem").write_bytes(certificate_pem)
    return key_pem, certificate_pem


@contextlib.contextmanager
def grpc_serving(handlers, tls: tuple[bytes, bytes] | None = None):
    """A gRPC server of `handlers` on a free port of 127.0.0.1, with TLS when `tls` (key and certificate PEM)
    is given; yields host:port. Shared by the fakes of Google's gRPC services."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), handlers=handlers)
    if tls:
        port = server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([tls]))
    else:
        port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(grace=None)


def unary_service(service: str, method: str, handle, request_type, response_type):
    """A generic handler of one unary method of `service` (proto-plus request and response types)."""
    rpc = grpc.unary_unary_rpc_method_handler(
        handle, request_deserializer=request_type.deserialize, response_serializer=response_type.serialize
    )
    return grpc.method_handlers_generic_handler(service, {method: rpc})


@contextlib.contextmanager
def serve(fake: FakeVertex, tls: tuple[bytes, bytes] | None = None):
    """Serves `fake` on a free port of 127.0.0.1; yields its address (host:port) for `cloud.api_endpoint`.
    With `tls` (key and certificate PEM) it speaks TLS, as Google's endpoints do, to clients in other
    processes that cannot be handed a plaintext channel."""
    with grpc_serving(_handlers(fake), tls) as address:
        yield address


@contextlib.contextmanager
def plaintext_channels(monkeypatch, address: str):
    """Clients open their gRPC channel to `address` without TLS; every other step of theirs is unchanged."""
    from google.api_core import grpc_helpers

    real = grpc_helpers.create_channel

    def create_channel(target, *args, **kwargs):
        return grpc.insecure_channel(target) if target == address else real(target, *args, **kwargs)

    monkeypatch.setattr(grpc_helpers, "create_channel", create_channel)
    yield


class QuietHandler(http.server.BaseHTTPRequestHandler):
    """An HTTP handler that answers with `reply` and keeps the test output clean."""

    def reply(self, status: int, body: bytes = b"", content_type: str = "application/json", **headers: str) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        if body:
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def http_server(handler: type[QuietHandler]):
    """Serves `handler` on a free port of 127.0.0.1 in a thread; yields the port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()


@contextlib.contextmanager
def serve_storage(monkeypatch, buckets):
    """Cloud Storage's JSON API for bucket lookups on 127.0.0.1; yields the paths it was asked for."""
    asked = []

    class Handler(QuietHandler):
        def do_GET(self):
            asked.append(self.path)
            name = self.path.split("?")[0].removeprefix("/storage/v1/b/")
            found = name in buckets
            self.reply(
                200 if found else 404, json.dumps({"name": name} if found else {"error": {"code": 404}}).encode()
            )

    with http_server(Handler) as port:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{port}")
        yield asked


@contextlib.contextmanager
def serve_metadata_server(project: str, email: str, token: str = "fake-token"):
    """The Compute Engine metadata server a Cloud Run function gets its credentials and project from, on
    127.0.0.1: yields the address for GCE_METADATA_HOST / GCE_METADATA_IP (google-auth's own settings). The account
    answers under `default` and under its email, as the real server does: google-auth asks by email once it knows it
    (its regional access boundary lookup learns it, at times before a token refresh)."""
    account = {
        "/": json.dumps(
            {"email": email, "aliases": ["default"], "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}
        ),
        "/email": email,
        "/token": json.dumps({"access_token": token, "expires_in": 3599, "token_type": "Bearer"}),
    }
    answers = {"/": "", "/computeMetadata/v1/project/project-id": project} | {
        f"/computeMetadata/v1/instance/service-accounts/{name}{leaf}": answer
        for name in ("default", email)
        for leaf, answer in account.items()
    }

    class Handler(QuietHandler):
        def do_GET(self):
            path = self.path.split("?")[0]
            if path not in answers or self.headers.get("Metadata-Flavor") != "Google":
                self.reply(404 if path not in answers else 403)
                return
            body = answers[path].encode()
            kind = "application/json" if body.startswith(b"{") else "text/plain"
            self.reply(200, body, kind, Metadata_Flavor="Google")

    with http_server(Handler) as port:
        yield f"127.0.0.1:{port}"
