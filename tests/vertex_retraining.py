"""The Vertex retraining tests' shared pieces: the profile, storage events, past jobs, and the handler sending to
the fake Vertex API (tests/fake_vertex.py) through the real GAPIC clients."""

from __future__ import annotations

from pathlib import Path

from cloudevents.http import CloudEvent
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform_v1

from pipeline.retraining import events, vertex

ROOT = Path(__file__).resolve().parents[1]


PROFILE = ROOT / "configs" / "vertex-retraining.yaml"


PARENT = "projects/my-gcp-project/locations/us-central1"


FINALIZED = "google.cloud.storage.object.v1.finalized"


def at(fake, config):
    """`config` talking to the fake Vertex API."""
    return config.model_copy(update={"cloud": config.cloud.model_copy(update={"api_endpoint": fake.address})})


def clients(fake, config):
    return vertex.vertex_clients(at(fake, config), AnonymousCredentials())


def job(span, state, attempt=1):
    return aiplatform_v1.PipelineJob(
        name=f"{PARENT}/pipelineJobs/hf-text-classifier-retraining-span-{span}-try-{attempt}",
        labels={vertex.PIPELINE_LABEL: "hf-text-classifier-retraining", vertex.SPAN_LABEL: str(span)},
        state=getattr(aiplatform_v1.PipelineState, state),
    )


GENERATION = "1700000000000001"
PRODUCER_MARK = {"hftfx-producer": "reviews-etl"}  # the profile's retraining.marker_metadata
# The bucket's objects as the fake Cloud Storage serves them (tests/fake_gcs.py; the `stored` fixture), and their
# generation and custom metadata: what the handler re-reads an event's object by.
STORED: dict[str, bytes] = {}
DESCRIBED: dict[str, dict] = {}


def storage_event(name, bucket="my-hftfx-data", kind=FINALIZED, written=True, metadata=PRODUCER_MARK):
    """A finalize event of `name`; `written`: the producer wrote it (the object is in the bucket at the event's
    generation, with `metadata`), else the event names an object that is not there."""
    if written:
        STORED[f"{bucket}/{name}"] = b""
        DESCRIBED[f"{bucket}/{name}"] = {"generation": GENERATION, "metadata": metadata}
    return CloudEvent(
        {"type": kind, "source": f"//storage.googleapis.com/projects/_/buckets/{bucket}", "subject": f"objects/{name}"},
        {"bucket": bucket, "name": name, "generation": GENERATION, "contentType": "text/csv"},
    )


def handle(event, profile, template_at_fake, fake, **kwargs):
    """The storage-event handler with real GAPIC clients sending to the fake."""
    config = at(fake, profile)
    return events.handle_storage_event(
        event, config, template_at_fake, clients(fake, config), AnonymousCredentials(), **kwargs
    )
