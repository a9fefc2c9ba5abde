"""Storage events in the cloud, request by request: each finished span submits one PipelineJob, once, whatever the
events' order, repeats or races; stray markers and old spans start nothing.

Only the Vertex service is faked (it cannot exist here): `tests/fake_vertex.py` serves the aiplatform v1 gRPC
services on 127.0.0.1, records every request, answers list calls from the jobs it holds, and refuses a second
job with the same id with ALREADY_EXISTS, as Vertex does.
The requests are sent by the real GAPIC clients over gRPC and parsed there as aiplatform_v1 protos.
"""

import base64
import json
from pathlib import Path

import pytest
from cloudevents.http import CloudEvent
from google.cloud import aiplatform_v1

from pipeline.cloud import submit
from pipeline.cloud.compiled_specs import component_tasks
from pipeline.cloud.kubeflow_v2_runner import compile_pipeline
from pipeline.retraining import events, vertex
from tests import vertex_retraining
from tests.vertex_retraining import FINALIZED, PARENT, PRODUCER_MARK, at, handle, job, storage_event
from tests.vertex_retraining import clients as vertex_clients_for


def test_the_ready_marker_of_a_new_span_submits_exactly_this_request(profile, template_at_fake, fake):
    fake.jobs = [job(6, "PIPELINE_STATE_SUCCEEDED")]  # a deployment that trained span 6
    result = handle(storage_event("reviews/span-7/_SUCCESS"), profile, template_at_fake, fake)
    assert result.submitted and result.decision.span == 7
    listed, created, relisted = fake.requests()  # the last: after submitting, older spans' runs to cancel
    assert relisted == listed
    assert listed.parent == PARENT
    assert listed.filter == 'labels.hftfx-pipeline="hf-text-classifier-retraining"'
    assert created.parent == PARENT
    assert created.pipeline_job_id == "hf-text-classifier-retraining-span-7-try-1"
    body = submit.request_json(created)["pipeline_job"]
    assert body["displayName"] == "hf-text-classifier-retraining"
    assert body["labels"] == {
        "team": "ml-platform",
        "app": "hf-text-classifier",
        "hftfx-pipeline": "hf-text-classifier-retraining",
        "hftfx-span": "7",
        "hftfx-trigger": "storage-event",
    }
    assert body["runtimeConfig"]["parameterValues"]["span"] == 7
    assert body["runtimeConfig"]["gcsOutputDirectory"] == "gs://my-hftfx-bucket/pipeline-root"
    assert body["serviceAccount"] == "hftfx-runner@my-gcp-project.iam.gserviceaccount.com"
    example_gen = component_tasks(body["pipelineSpec"])["HFDatasetExampleGen"]
    assert example_gen["inputs"]["parameters"]["span"] == {"componentInputParameter": "span"}
    dataset = json.loads(example_gen["inputs"]["parameters"]["dataset_config"]["runtimeValue"]["constant"])
    assert dataset["split_files"]["train"] == ["gs://my-hftfx-data/reviews/span-{SPAN}/*.csv"]


def test_repeated_and_late_events_of_one_span_start_no_second_run(profile, template_at_fake, fake):
    fake.jobs = [job(6, "PIPELINE_STATE_SUCCEEDED")]
    handle(storage_event("reviews/span-7/_SUCCESS"), profile, template_at_fake, fake)
    again = handle(storage_event("reviews/span-7/_SUCCESS"), profile, template_at_fake, fake)  # at-least-once delivery
    assert not again.submitted
    assert again.decision.reason == "span 7 is being trained by run hf-text-classifier-retraining-span-7-try-1"
    fake.jobs[-1].state = aiplatform_v1.PipelineState.PIPELINE_STATE_SUCCEEDED
    late = handle(storage_event("reviews/span-7/_SUCCESS"), profile, template_at_fake, fake)
    assert "already trained by run hf-text-classifier-retraining-span-7-try-1" in late.decision.reason
    assert len(fake.requests("PipelineService/CreatePipelineJob")) == 1


def test_two_handlers_deciding_at_once_create_one_job(profile, template_at_fake, fake):
    fake.jobs = [job(7, "PIPELINE_STATE_SUCCEEDED")]
    first = handle(storage_event("reviews/span-8/_SUCCESS"), profile, template_at_fake, fake)
    # The second handler listed the jobs before the first created its job: it decides "train" too.
    before = aiplatform_v1.ListPipelineJobsResponse(pipeline_jobs=[job(7, "PIPELINE_STATE_SUCCEEDED")])
    fake.list_pipeline_jobs = lambda request, context: before
    second = handle(storage_event("reviews/span-8/_SUCCESS"), profile, template_at_fake, fake)
    assert first.submitted and not second.submitted
    assert second.decision.reason == (
        "run hf-text-classifier-retraining-span-8-try-1 was already submitted by a concurrent trigger"
    )
    assert len(fake.jobs) == 2


def test_a_failed_run_is_retried_with_the_next_attempt_id_until_max_attempts(profile, template_at_fake, fake):
    fake.jobs = [job(9, "PIPELINE_STATE_FAILED")]
    retry = handle(storage_event("reviews/span-9/_SUCCESS"), profile, template_at_fake, fake)
    assert retry.request.pipeline_job_id == "hf-text-classifier-retraining-span-9-try-2"
    assert fake.requests("PipelineService/CreatePipelineJob")[-1].pipeline_job_id == retry.request.pipeline_job_id
    fake.jobs = [job(9, "PIPELINE_STATE_FAILED", a) for a in (1, 2, 3)]
    given_up = handle(storage_event("reviews/span-9/_SUCCESS"), profile, template_at_fake, fake)
    assert not given_up.submitted and "failed 3 times" in given_up.decision.reason


LARGEST_SPAN = "the largest a pipeline parameter carries exactly"


@pytest.mark.parametrize(
    ("name", "kind", "bucket", "reason"),
    [
        ("reviews/span-7/part-0.csv", FINALIZED, "my-hftfx-data", "only the ready marker '_SUCCESS' starts a run"),
        ("models/readme.txt", FINALIZED, "my-hftfx-data", "is not span data"),
        ("reviews/span-7/_SUCCESS", "google.cloud.storage.object.v1.deleted", "my-hftfx-data", "ignored"),
        # forged and odd span names
        ("reviews/span-0/_SUCCESS", FINALIZED, "my-hftfx-data", "span 0 means 'the newest span'"),
        (f"reviews/span-{'9' * 80}/_SUCCESS", FINALIZED, "my-hftfx-data", LARGEST_SPAN),
        ("reviews/span-7/_SUCCESS", FINALIZED, "someone-elses-bucket", "is not span data"),
        ("reviews/span-7x/_SUCCESS", FINALIZED, "my-hftfx-data", "is not span data"),
        ("reviews/span-9/../span-7/_SUCCESS", FINALIZED, "my-hftfx-data", "is not span data"),
        ("reviews/span-03/_SUCCESS", FINALIZED, "my-hftfx-data", "span name '03' is not how this dataset names span 3"),
        ("reviews/span-\u0663/_SUCCESS", FINALIZED, "my-hftfx-data", "holds digits other than ASCII 0-9"),
    ],
)
def test_objects_that_are_not_a_finished_span_are_refused_with_the_reason(
    profile, template_at_fake, fake, name, kind, bucket, reason
):
    result = handle(storage_event(name, bucket=bucket, kind=kind), profile, template_at_fake, fake)
    assert result.decision.action == "skip" and reason in result.decision.reason
    assert fake.requests() == []


def test_a_stray_far_future_marker_cancels_nothing_and_blocks_no_real_span(profile, template_at_fake, fake):
    """One stray or forged reviews/span-99999999/_SUCCESS while span 7 trains: refused by retraining.max_span_gap,
    so span 7's run goes on and span 8, when it lands, is trained."""
    fake.jobs = [job(6, "PIPELINE_STATE_SUCCEEDED"), job(7, "PIPELINE_STATE_RUNNING")]
    stray = handle(storage_event("reviews/span-99999999/_SUCCESS"), profile, template_at_fake, fake)
    assert not stray.submitted and stray.cancelled == []
    assert "max_span_gap (100,000) above span 6, the newest a complete run" in stray.decision.reason
    assert fake.requests("PipelineService/CreatePipelineJob") == []
    assert fake.requests("PipelineService/CancelPipelineJob") == []
    real = handle(storage_event("reviews/span-8/_SUCCESS"), profile, template_at_fake, fake)
    assert real.submitted and real.request.pipeline_job_id == "hf-text-classifier-retraining-span-8-try-1"
    # with no limit the same marker is trained, yet still cancels nothing: an event more than one span ahead of a
    # run in flight never cancels it
    rules = profile.retraining.model_copy(update={"max_span_gap": 0})
    unlimited = profile.model_copy(update={"retraining": rules})
    fake.jobs = [job(6, "PIPELINE_STATE_SUCCEEDED"), job(7, "PIPELINE_STATE_RUNNING")]
    taken = handle(storage_event("reviews/span-99999999/_SUCCESS"), unlimited, template_at_fake, fake)
    assert taken.submitted and taken.cancelled == []
    assert fake.jobs[1].state == aiplatform_v1.PipelineState.PIPELINE_STATE_RUNNING


def test_without_a_marker_any_data_file_of_a_span_counts(profile, template_at_fake, fake):
    fake.jobs = [job(3, "PIPELINE_STATE_SUCCEEDED")]
    dataset = profile.dataset.model_copy(update={"ready_marker": ""})
    unmarked = profile.model_copy(update={"dataset": dataset})
    spec = Path(template_at_fake).with_name("unmarked.yaml")
    compile_pipeline(at(fake, unmarked), spec)
    result = handle(storage_event("reviews/span-4/part-0.csv"), unmarked, str(spec), fake)
    assert result.submitted and result.request.pipeline_job_id == "hf-text-classifier-retraining-span-4-try-1"


def test_pubsub_push_envelopes_and_structured_cloudevents_are_understood():
    attributes = {"bucketId": "b", "objectId": "reviews/span-3/_SUCCESS", "eventType": "OBJECT_FINALIZE"}
    payload = base64.b64encode(json.dumps({"name": "reviews/span-3/_SUCCESS"}).encode()).decode()
    envelope = {"message": {"attributes": attributes, "data": payload}, "subscription": "s"}
    assert events.parse_storage_event(envelope).uri == "gs://b/reviews/span-3/_SUCCESS"
    structured = {"type": FINALIZED, "data": {"bucket": "b", "name": "x.csv"}}
    assert events.parse_storage_event(structured).uri == "gs://b/x.csv"
    with pytest.raises(events.EventError, match="not a storage notification"):
        events.parse_storage_event({"message": {"attributes": {}}})


def test_eventarc_pubsub_trigger_cloudevents_unwrap_to_the_storage_notification(profile, template_at_fake, fake):
    """An Eventarc trigger on the bucket's Pub/Sub notification topic delivers messagePublished CloudEvents whose
    data is the push envelope; the storage object is in the message's attributes."""
    attributes = {
        "bucketId": "my-hftfx-data",
        "objectId": "reviews/span-9/_SUCCESS",
        "eventType": "OBJECT_FINALIZE",
        "objectGeneration": "1700000000000009",
        "payloadFormat": "JSON_API_V1",
    }
    resource = {"bucket": "my-hftfx-data", "name": "reviews/span-9/_SUCCESS", "generation": "1700000000000009"}
    event = CloudEvent(
        {
            "type": events.PUBSUB_MESSAGE_TYPE,
            "source": "//pubsub.googleapis.com/projects/my-gcp-project/topics/hftfx-data",
        },
        {
            "message": {
                "attributes": attributes,
                "data": base64.b64encode(json.dumps(resource).encode()).decode(),
                "messageId": "1",
            },
            "subscription": "projects/my-gcp-project/subscriptions/eventarc-us-central1-hftfx-sub",
        },
    )
    vertex_retraining.STORED["my-hftfx-data/reviews/span-9/_SUCCESS"] = b""
    vertex_retraining.DESCRIBED["my-hftfx-data/reviews/span-9/_SUCCESS"] = {
        "generation": "1700000000000009",
        "metadata": PRODUCER_MARK,
    }
    fake.jobs = [job(8, "PIPELINE_STATE_SUCCEEDED")]
    stored = events.parse_storage_event(event)
    assert (stored.uri, stored.event_type, stored.generation) == (
        "gs://my-hftfx-data/reviews/span-9/_SUCCESS",
        "OBJECT_FINALIZE",
        "1700000000000009",
    )
    result = handle(event, profile, template_at_fake, fake)
    assert result.submitted and result.request.pipeline_job_id == "hf-text-classifier-retraining-span-9-try-1"
    with pytest.raises(events.EventError, match="without a Pub/Sub message"):
        events.parse_storage_event(CloudEvent({"type": events.PUBSUB_MESSAGE_TYPE, "source": "//x"}, {"x": 1}))


def test_an_older_spans_event_arriving_while_a_newer_span_trains_submits_nothing(profile, template_at_fake, fake):
    """Span 3's marker, then span 2's (storage delivers out of order, or span 2 was re-uploaded)."""
    fake.jobs = [job(1, "PIPELINE_STATE_SUCCEEDED")]
    assert handle(storage_event("reviews/span-3/_SUCCESS"), profile, template_at_fake, fake).submitted
    late = handle(storage_event("reviews/span-2/_SUCCESS"), profile, template_at_fake, fake)
    assert not late.submitted and "arrived after span 3, which is being trained" in late.decision.reason
    fake.jobs[-1].state = aiplatform_v1.PipelineState.PIPELINE_STATE_SUCCEEDED
    later = handle(storage_event("reviews/span-2/_SUCCESS"), profile, template_at_fake, fake)
    assert not later.submitted and "arrived after span 3, which was trained by run" in later.decision.reason
    created = fake.requests("PipelineService/CreatePipelineJob")
    assert [r.pipeline_job.labels[vertex.SPAN_LABEL] for r in created] == ["3"]


def test_a_newer_span_cancels_an_older_spans_run_still_in_flight(profile, template_at_fake, fake):
    """Span 2 is training when span 3 lands (or both events were handled at once): the newest span wins."""
    fake.jobs = [job(2, "PIPELINE_STATE_RUNNING")]
    newer = handle(storage_event("reviews/span-3/_SUCCESS"), profile, template_at_fake, fake)
    assert newer.submitted and newer.cancelled == [f"{PARENT}/pipelineJobs/hf-text-classifier-retraining-span-2-try-1"]
    (cancel,) = fake.requests("PipelineService/CancelPipelineJob")
    assert cancel.name == newer.cancelled[0]
    assert fake.jobs[0].state == aiplatform_v1.PipelineState.PIPELINE_STATE_CANCELLED
    assert any(line.startswith("cancelled: ") for line in newer.lines(show_request=False))


def test_an_older_spans_event_also_cancels_its_run_still_in_flight(profile, template_at_fake, fake):
    """Span 3 trains and span 2's run is still going (its cancellation was lost, say): span 2's late event
    submits nothing and ends that run."""
    fake.jobs = [job(3, "PIPELINE_STATE_RUNNING"), job(2, "PIPELINE_STATE_RUNNING")]
    late = handle(storage_event("reviews/span-2/_SUCCESS"), profile, template_at_fake, fake)
    assert not late.submitted and late.cancelled == [
        f"{PARENT}/pipelineJobs/hf-text-classifier-retraining-span-2-try-1"
    ]
    dry = handle(storage_event("reviews/span-2/_SUCCESS"), profile, template_at_fake, fake, dry_run=True)
    assert dry.cancelled == [] and len(fake.requests("PipelineService/CancelPipelineJob")) == 1


FORGED_NEAR = "reviews/span-100006/_SUCCESS"  # within the gap of the newest complete span, 6


def test_a_forged_span_while_a_real_one_trains_cancels_nothing_and_blocks_nothing(profile, template_at_fake, fake):
    """(a) Span 7 trains; a forged marker within the gap of the newest complete span lands (here written by someone
    without the producer's mark): refused, span 7 goes on, and span 8 trains when it lands."""
    fake.jobs = [job(6, "PIPELINE_STATE_SUCCEEDED"), job(7, "PIPELINE_STATE_RUNNING")]
    forged = handle(storage_event(FORGED_NEAR, metadata={}), profile, template_at_fake, fake)
    assert not forged.submitted and forged.cancelled == []
    assert "lacks the producer's mark (custom metadata ['hftfx-producer']" in forged.decision.reason
    fake.jobs[1].state = aiplatform_v1.PipelineState.PIPELINE_STATE_SUCCEEDED
    real = handle(storage_event("reviews/span-8/_SUCCESS"), profile, template_at_fake, fake)
    assert real.submitted and real.request.pipeline_job_id == "hf-text-classifier-retraining-span-8-try-1"
    assert fake.requests("PipelineService/CancelPipelineJob") == []


def test_a_fresh_deployment_starts_from_first_span_alone(profile, template_at_fake, fake):
    """(b) No runs yet: span-99999999 (and any span but retraining.first_span) is refused; span 1 then trains."""
    far = handle(storage_event("reviews/span-99999999/_SUCCESS"), profile, template_at_fake, fake)
    assert not far.submitted and "is not retraining.first_span (1)" in far.decision.reason
    first = handle(storage_event("reviews/span-1/_SUCCESS"), profile, template_at_fake, fake)
    assert first.submitted and first.request.pipeline_job_id == "hf-text-classifier-retraining-span-1-try-1"


def test_failed_forgeries_do_not_move_the_window(profile, template_at_fake, fake):
    """(c) A marker that passed the checks but whose run failed (no data behind it) moves nothing: the window stays
    measured from the newest complete span, so a second one 100,000 further is refused, and span 7 still trains."""
    fake.jobs = [job(6, "PIPELINE_STATE_SUCCEEDED"), job(100006, "PIPELINE_STATE_FAILED")]
    further = handle(storage_event("reviews/span-200006/_SUCCESS"), profile, template_at_fake, fake)
    assert not further.submitted and "above span 6, the newest a complete run consumed" in further.decision.reason
    real = handle(storage_event("reviews/span-7/_SUCCESS"), profile, template_at_fake, fake)
    assert real.submitted


def test_an_event_for_an_object_not_there_at_its_generation_is_refused(profile, template_at_fake, fake):
    """An event whose object is not in the bucket (a forged request to the function), or not at that generation
    (replaced since): re-read by its generation, it starts nothing."""
    fake.jobs = [job(6, "PIPELINE_STATE_SUCCEEDED")]
    absent = handle(storage_event("reviews/span-7/_SUCCESS", written=False), profile, template_at_fake, fake)
    assert not absent.submitted and "no object at generation 1700000000000001" in absent.decision.reason
    vertex_retraining.STORED["my-hftfx-data/reviews/span-7/_SUCCESS"] = b""
    vertex_retraining.DESCRIBED["my-hftfx-data/reviews/span-7/_SUCCESS"] = {"generation": "1800000000000000"}
    replaced = handle(storage_event("reviews/span-7/_SUCCESS", written=False), profile, template_at_fake, fake)
    assert not replaced.submitted and "or the object was replaced since" in replaced.decision.reason
    assert fake.requests("PipelineService/CreatePipelineJob") == []


def test_forget_span_undoes_a_mistaken_span_so_real_spans_train_again(profile, template_at_fake, fake):
    """A mistaken marker's span trained to completion (uploaded with the producer's mark by mistake): every real
    span after it is refused as older. `hftfx trigger forget-span --cloud --span 100006` cancels and deletes its
    runs (at the fake, through the real GAPIC client), and span 8 trains."""
    fake.jobs = [job(7, "PIPELINE_STATE_SUCCEEDED"), job(100006, "PIPELINE_STATE_SUCCEEDED")]
    refused = handle(storage_event("reviews/span-8/_SUCCESS"), profile, template_at_fake, fake)
    assert not refused.submitted and "arrived after span 100006" in refused.decision.reason
    config = at(fake, profile)
    lines = vertex.forget_span(config, vertex_clients_for(fake, profile), 100006)
    assert lines == [f"forgotten: {PARENT}/pipelineJobs/hf-text-classifier-retraining-span-100006-try-1"]
    (deleted,) = fake.requests("PipelineService/DeletePipelineJob")
    assert deleted.name == f"{PARENT}/pipelineJobs/hf-text-classifier-retraining-span-100006-try-1"
    assert handle(storage_event("reviews/span-8/_SUCCESS"), profile, template_at_fake, fake).submitted
    assert vertex.forget_span(config, vertex_clients_for(fake, profile), 100006) == ["no run of span 100006 to forget"]
