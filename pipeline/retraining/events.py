"""Cloud Storage object-finalize events -> a span -> one Vertex run, with the triggers' exactly-once rules.

Deploy `on_object_finalized` as a Cloud Run function with an Eventarc trigger on
`google.cloud.storage.object.v1.finalized` for the data bucket (see docs/retraining.md). Eventarc / Cloud Functions
CloudEvents, Pub/Sub push envelopes of storage notifications, and the `messagePublished` CloudEvents an
Eventarc Pub/Sub trigger wraps those envelopes in, are all understood. Storage delivers
events at least once and one span is many files: the span's fixed job id makes the repeats no-ops, and a
`dataset.ready_marker` (e.g. _SUCCESS) makes only the marker start the run, once every file is there. Only real
data moves spans: the object is re-read by the event's generation and must carry the producer's mark
(retraining.marker_metadata), and a span far from the newest one trained is refused (decision.outside_window).
Events also come out of order: a span older than one trained or in flight is refused, and older runs still in flight
are cancelled once a newer one is submitted. Errors no retry fixes are logged and returned; any other raises,
so a deployment with retries gets the event again.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
from collections.abc import Mapping
from typing import Any

from components.example_gen import spans
from models.errors import UserError
from pipeline.config.pipeline_config import PipelineConfig, load_config
from pipeline.retraining import decision
from pipeline.retraining.vertex import STORAGE_EVENT, CloudTriggerResult, VertexClients, cloud_trigger

FINALIZED_TYPES = ("google.cloud.storage.object.v1.finalized", "OBJECT_FINALIZE")
PUBSUB_MESSAGE_TYPE = "google.cloud.pubsub.topic.v1.messagePublished"  # Eventarc's wrapper of a Pub/Sub push


class EventError(UserError, ValueError):
    """The request is not a Cloud Storage notification this handler understands."""


@dataclasses.dataclass(frozen=True)
class StorageObject:
    bucket: str
    name: str
    event_type: str
    generation: str = ""

    @property
    def uri(self) -> str:
        return f"gs://{self.bucket}/{self.name}"


def parse_storage_event(event: Any) -> StorageObject:
    """A CloudEvent (object or structured JSON) of a storage object, a Pub/Sub push envelope of a storage
    notification, or Eventarc's messagePublished CloudEvent around such an envelope."""
    if isinstance(event, Mapping) and "message" in event:  # Pub/Sub push: attributes carry the object
        attributes = event["message"].get("attributes", {})
        if "bucketId" not in attributes or "objectId" not in attributes:
            raise EventError("Pub/Sub message without bucketId/objectId attributes: not a storage notification")
        return StorageObject(
            attributes["bucketId"],
            attributes["objectId"],
            attributes.get("eventType", ""),
            attributes.get("objectGeneration", ""),
        )
    if isinstance(event, Mapping):
        event_type, data = event.get("type", ""), event.get("data")
    else:  # cloudevents.http.CloudEvent, as functions_framework passes it
        event_type, data = event["type"], event.data
    if isinstance(data, bytes | str):
        data = json.loads(base64.b64decode(data) if isinstance(data, bytes) else data)
    if event_type == PUBSUB_MESSAGE_TYPE:
        if not isinstance(data, Mapping) or "message" not in data:
            raise EventError(f"{PUBSUB_MESSAGE_TYPE} event without a Pub/Sub message: not a storage notification")
        return parse_storage_event(data)
    if not isinstance(data, Mapping) or "bucket" not in data or "name" not in data:
        raise EventError(f"event {event_type!r} carries no bucket/name: not a Cloud Storage object event")
    return StorageObject(data["bucket"], data["name"], event_type, str(data.get("generation", "")))


def handle_storage_event(
    event: Any, config: PipelineConfig, template: str, clients: VertexClients, credentials, *, dry_run=False
) -> CloudTriggerResult:
    """Maps the object to a span and lets the trigger rules decide; ignores what is not span data."""
    stored = parse_storage_event(event)
    if stored.event_type not in FINALIZED_TYPES:
        return CloudTriggerResult(decision.Decision("skip", None, f"ignored {stored.event_type} event"))
    digits = spans.span_of_path(config.dataset, stored.uri)
    if digits is None:
        patterns = [p for files in spans.patterns(config.dataset).values() for p in files]
        marker = f" (only the ready marker '{config.dataset.ready_marker}' starts a run)"
        reason = f"{stored.uri} is not span data of {patterns}{marker if config.dataset.ready_marker else ''}"
        return CloudTriggerResult(decision.Decision("skip", None, reason))
    if problem := spans.span_problem(digits, config.dataset.span_digits):
        return CloudTriggerResult(decision.Decision("skip", None, f"{stored.uri} refused: {problem}"))
    if problem := not_the_producers(stored, config, credentials):
        return CloudTriggerResult(decision.Decision("skip", int(digits), f"{stored.uri} refused: {problem}"))
    return cloud_trigger(
        config, template, clients, credentials, span=int(digits), trigger=STORAGE_EVENT, dry_run=dry_run
    )


def not_the_producers(stored: StorageObject, config: PipelineConfig, credentials) -> str | None:
    """Why the event's object is not taken for the producer's, or None: it is re-read by the event's generation
    (an event for an object that is not there, or no longer that version of it, starts nothing) and must carry
    retraining.marker_metadata (the mark the producer sets on each upload; docs/retraining.md)."""
    from google.cloud import storage

    if not stored.generation.isdigit():
        return "the event names no generation of the object to re-read it by"
    client = storage.Client(project=config.cloud.project, credentials=credentials)
    blob = client.bucket(stored.bucket).get_blob(stored.name, generation=int(stored.generation))
    if blob is None:
        return f"no object at generation {stored.generation}: a forged event, or the object was replaced since"
    found = blob.metadata or {}
    missing = sorted(key for key, value in config.retraining.marker_metadata.items() if found.get(key) != value)
    if missing:
        return (
            f"it lacks the producer's mark (custom metadata {missing}, as retraining.marker_metadata sets): not "
            "written by the data's producer"
        )
    return None


def on_object_finalized(cloud_event) -> str:
    """Cloud Run functions entry point. HFTFX_CONFIG names the cloud profile, HFTFX_TEMPLATE the compiled
    spec (default: the one committed for the profile; both deployed with the function's source); the
    function's service account is used."""
    from pipeline.cloud import submit
    from pipeline.cloud.compiled_specs import default_template
    from pipeline.retraining.vertex import vertex_clients

    config_path = os.environ.get("HFTFX_CONFIG", "configs/vertex-retraining.yaml")
    config = load_config(config_path)
    template = os.environ.get("HFTFX_TEMPLATE") or default_template(config_path)
    credentials = submit.default_credentials()
    try:
        result = handle_storage_event(cloud_event, config, template, vertex_clients(config, credentials), credentials)
    except UserError as error:  # an event or profile that no retry fixes: logged, not raised (raising retries)
        print(json.dumps({"severity": "ERROR", "message": f"refused: {error}"}))
        return f"refused: {error}"
    outcome = "submitted" if result.submitted else result.decision.action
    message = "; ".join([f"{outcome}: {result.decision.reason}", *(f"cancelled {n}" for n in result.cancelled)])
    print(json.dumps({"severity": "INFO", "message": message}))  # structured log line for Cloud Logging
    return message
