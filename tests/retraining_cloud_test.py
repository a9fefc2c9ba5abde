"""Vertex retraining offline: storage events, the cloud trigger and schedules, request by request.

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
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform_v1

from pipeline import cli
from pipeline.cloud import submit
from pipeline.cloud.compiled_specs import component_tasks, default_template
from pipeline.cloud.kubeflow_v2_runner import compile_pipeline
from pipeline.config import pipeline_config
from pipeline.retraining import events, vertex
from tests import fake_vertex
from tests.fake_vertex import FakeVertex

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "configs" / "vertex-retraining.yaml"
PARENT = "projects/my-gcp-project/locations/us-central1"
FINALIZED = "google.cloud.storage.object.v1.finalized"


@pytest.fixture
def fake(monkeypatch):
    """The fake Vertex API on 127.0.0.1; tests put past jobs in `fake.jobs`."""
    api = FakeVertex()
    with fake_vertex.serve(api) as address, fake_vertex.plaintext_channels(monkeypatch, address):
        api.address = address
        yield api


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


@pytest.fixture(scope="module")
def profile():
    return pipeline_config.load_config(PROFILE)


@pytest.fixture(scope="module")
def template(profile, tmp_path_factory):
    path = tmp_path_factory.mktemp("spec") / "pipeline-retraining.yaml"
    compile_pipeline(profile, path)
    return str(path)


@pytest.fixture
def template_at_fake(profile, fake, tmp_path):
    """The profile's spec compiled for the fake's API host (the host is baked into the spec's Vertex calls)."""
    path = tmp_path / "pipeline-retraining.yaml"
    compile_pipeline(at(fake, profile), path)
    return str(path)


def storage_event(name, bucket="my-hftfx-data", kind=FINALIZED):
    return CloudEvent(
        {"type": kind, "source": f"//storage.googleapis.com/projects/_/buckets/{bucket}", "subject": f"objects/{name}"},
        {"bucket": bucket, "name": name, "generation": "1700000000000001", "contentType": "text/csv"},
    )


def handle(event, profile, template_at_fake, fake, **kwargs):
    """The storage-event handler with real GAPIC clients sending to the fake."""
    config = at(fake, profile)
    return events.handle_storage_event(
        event, config, template_at_fake, clients(fake, config), AnonymousCredentials(), **kwargs
    )


def test_the_ready_marker_of_a_new_span_submits_exactly_this_request(profile, template_at_fake, fake):
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
    handle(storage_event("reviews/span-7/_SUCCESS"), profile, template_at_fake, fake)
    again = handle(storage_event("reviews/span-7/_SUCCESS"), profile, template_at_fake, fake)  # at-least-once delivery
    assert not again.submitted
    assert again.decision.reason == "span 7 is being trained by run hf-text-classifier-retraining-span-7-try-1"
    fake.jobs[0].state = aiplatform_v1.PipelineState.PIPELINE_STATE_SUCCEEDED
    late = handle(storage_event("reviews/span-7/_SUCCESS"), profile, template_at_fake, fake)
    assert "already trained by run hf-text-classifier-retraining-span-7-try-1" in late.decision.reason
    assert len(fake.requests("PipelineService/CreatePipelineJob")) == 1


def test_two_handlers_deciding_at_once_create_one_job(profile, template_at_fake, fake):
    first = handle(storage_event("reviews/span-8/_SUCCESS"), profile, template_at_fake, fake)
    # The second handler listed the jobs before the first created its job: it decides "train" too.
    fake.list_pipeline_jobs = lambda request, context: aiplatform_v1.ListPipelineJobsResponse()
    second = handle(storage_event("reviews/span-8/_SUCCESS"), profile, template_at_fake, fake)
    assert first.submitted and not second.submitted
    assert second.decision.reason == (
        "run hf-text-classifier-retraining-span-8-try-1 was already submitted by a concurrent trigger"
    )
    assert len(fake.jobs) == 1


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
    assert "more than retraining.max_span_gap (100,000) above span 7" in stray.decision.reason
    assert fake.requests("PipelineService/CreatePipelineJob") == []
    assert fake.requests("PipelineService/CancelPipelineJob") == []
    real = handle(storage_event("reviews/span-8/_SUCCESS"), profile, template_at_fake, fake)
    assert real.submitted and real.request.pipeline_job_id == "hf-text-classifier-retraining-span-8-try-1"
    # with no limit the same marker is trained, and the real run of span 7 is cancelled: what the gap prevents
    rules = profile.retraining.model_copy(update={"max_span_gap": 0})
    unlimited = profile.model_copy(update={"retraining": rules})
    fake.jobs = [job(6, "PIPELINE_STATE_SUCCEEDED"), job(7, "PIPELINE_STATE_RUNNING")]
    taken = handle(storage_event("reviews/span-99999999/_SUCCESS"), unlimited, template_at_fake, fake)
    assert taken.submitted and taken.cancelled == [f"{PARENT}/pipelineJobs/hf-text-classifier-retraining-span-7-try-1"]


def test_without_a_marker_any_data_file_of_a_span_counts(profile, template_at_fake, fake):
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


def test_local_trigger_run_on_vertex_discovers_spans_and_dry_run_sends_nothing(profile, tmp_path, fake):
    for span in (1, 2):
        (tmp_path / f"span-{span}").mkdir()
        (tmp_path / f"span-{span}" / "part-0.csv").write_text("text,label\nfine,fresh\n")
        (tmp_path / f"span-{span}" / "_SUCCESS").write_text("")
    split_files = {**profile.dataset.split_files, "train": (f"{tmp_path}/span-{{SPAN}}/*.csv",)}
    config = profile.model_copy(update={"dataset": profile.dataset.model_copy(update={"split_files": split_files})})
    spec = tmp_path / "spec.yaml"
    compile_pipeline(at(fake, config), spec)
    fake.jobs = [job(1, "PIPELINE_STATE_SUCCEEDED")]
    result = vertex.cloud_trigger(at(fake, config), spec, clients(fake, config), AnonymousCredentials(), dry_run=True)
    assert (result.decision.action, result.decision.span) == ("train", 2)
    assert result.request.pipeline_job_id == "hf-text-classifier-retraining-span-2-try-1"
    assert not result.submitted and len(fake.jobs) == 1
    assert fake.requests("PipelineService/CreatePipelineJob") == []


def test_schedule_create_request_field_by_field(profile, template_at_fake, fake):
    request = vertex.create_schedule_request(
        at(fake, profile), template_at_fake, "TZ=Europe/Paris 0 3 * * 1", AnonymousCredentials(), max_runs=52
    )
    created = vertex.send_schedule_request(clients(fake, profile), request)
    (received,) = fake.requests("ScheduleService/CreateSchedule")
    assert received == request and created.name == f"{PARENT}/schedules/1"
    body = submit.request_json(received)
    assert body["parent"] == PARENT
    schedule = body["schedule"]
    assert schedule["displayName"] == "hf-text-classifier-retraining-retrain"
    assert schedule["cron"] == "TZ=Europe/Paris 0 3 * * 1"
    assert schedule["maxConcurrentRunCount"] == "1"
    assert schedule["maxRunCount"] == "52"
    job_request = schedule["createPipelineJobRequest"]
    assert job_request["parent"] == PARENT
    pipeline_job = job_request["pipelineJob"]
    assert pipeline_job["serviceAccount"] == "hftfx-runner@my-gcp-project.iam.gserviceaccount.com"
    assert pipeline_job["labels"]["hftfx-trigger"] == "schedule"
    assert pipeline_job["runtimeConfig"]["parameterValues"]["span"] == 0  # the newest span at each tick
    assert pipeline_job["runtimeConfig"]["gcsOutputDirectory"] == "gs://my-hftfx-bucket/pipeline-root"
    tasks = pipeline_job["pipelineSpec"]["root"]["dag"]["tasks"]
    assert not any(task.get("cachingOptions", {}).get("enableCache") for task in tasks.values())


def test_schedule_commands_send_each_request_and_print_what_vertex_answered(profile, template_at_fake, fake):
    """What `hftfx schedule create/list/pause/resume/delete` does, through the fake ScheduleService."""
    config, credentials = at(fake, profile), AnonymousCredentials()

    def command(action, **kwargs):
        return vertex.schedule_command(config, action, clients(fake, profile), credentials, **kwargs)

    assert command("create", template=template_at_fake, cron="TZ=UTC 0 3 * * 1") == [
        f"created {PARENT}/schedules/1 (cron 'TZ=UTC 0 3 * * 1')"
    ]
    listed = command("list")
    assert len(listed) == 1 and listed[0].startswith(f"{PARENT}/schedules/1  ACTIVE     cron 'TZ=UTC 0 3 * * 1'")
    for action in ("pause", "resume", "delete"):
        assert command(action, schedule="1") == [f"{action}: {PARENT}/schedules/1"]
    assert [type(r).__name__ for r in fake.requests()] == [
        "CreateScheduleRequest",
        "ListSchedulesRequest",
        "PauseScheduleRequest",
        "ResumeScheduleRequest",
        "DeleteScheduleRequest",
    ]
    assert fake.requests()[1].filter == 'display_name="hf-text-classifier-retraining-retrain"'
    with pytest.raises(pipeline_config.ConfigError, match="neither a schedule id"):
        command("pause", schedule="nightly")
    with pytest.raises(pipeline_config.ConfigError, match="needs the schedule id"):
        command("delete")
    with pytest.raises(pipeline_config.ConfigError, match="needs --cron"):
        command("create", template=template_at_fake)
    assert len(fake.requests()) == 5  # refused before anything was sent


@pytest.mark.parametrize("cron", ["every day", "0 3 * *", "0 3 * * 1 2020"])
def test_bad_cron_expressions_are_refused_with_an_example(cron):
    with pytest.raises(pipeline_config.ConfigError, match="five fields"):
        vertex.check_cron(cron)


def test_a_schedule_time_zone_must_be_an_iana_zone():
    assert vertex.check_cron("TZ=Europe/Paris 0 3 * * 1") == "TZ=Europe/Paris 0 3 * * 1"
    with pytest.raises(pipeline_config.ConfigError, match="'Europe/Pariss' is not an IANA time zone"):
        vertex.check_cron("TZ=Europe/Pariss 0 3 * * 1")


def test_a_template_compiled_from_another_profile_is_refused_naming_the_keys(profile):
    with pytest.raises(pipeline_config.ConfigError, match="compiled from other settings than this profile") as refused:
        submit.check_template(ROOT / "pipeline.yaml", profile)
    for key in ("dataset.name", "dataset.split_files", "cloud.push_to", "pipeline_name"):
        assert f"{key} (" in str(refused.value)
    assert "hftfx compile --config <profile> --output" in str(refused.value)


def test_schedule_cli_dry_run_prints_the_request(template, capsys):
    code = cli.main(["schedule", "create", "--cron", "0 3 * * 1", "--template", template, "--dry-run"])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["schedule"]["cron"] == "0 3 * * 1"
    assert cli.main(["schedule", "create", "--cron", "daily", "--template", template, "--dry-run"]) == 2


def test_trigger_cli_dry_run_shows_the_request_without_asking_vertex(template, capsys):
    code = cli.main(["trigger", "run", "--cloud", "--template", template, "--span", "7", "--dry-run"])
    assert code == 0
    out = capsys.readouterr().out
    assert out.startswith("decision:  train span 7\n")
    assert "(dry run: past runs on Vertex not asked)" in out
    request = json.loads(out[out.index("{") :])
    assert request["pipeline_job_id"] == "hf-text-classifier-retraining-span-7-try-1"
    assert request["pipeline_job"]["runtimeConfig"]["parameterValues"]["span"] == 7


def test_schedule_with_its_defaults_sends_the_spec_compiled_from_its_profile(capsys, monkeypatch):
    """`hftfx schedule create` with no --config/--template: the retraining profile and its own committed spec
    (pipeline.yaml is compiled from another dataset config and would be refused)."""
    monkeypatch.chdir(ROOT)
    assert cli.main(["schedule", "create", "--cron", "TZ=UTC 0 3 * * 1", "--dry-run"]) == 0
    printed = capsys.readouterr().out
    body, _ = json.JSONDecoder().raw_decode(printed[printed.index("{") :])
    spec = body["schedule"]["createPipelineJobRequest"]["pipelineJob"]["pipelineSpec"]
    assert spec["pipelineInfo"]["name"] == "hf-text-classifier-retraining"
    with pytest.raises(pipeline_config.ConfigError, match="compiled from other settings than this profile"):
        submit.check_template(ROOT / "pipeline.yaml", pipeline_config.load_config(PROFILE))
    with pytest.raises(pipeline_config.ConfigError, match=r"no compiled spec is committed for my\.yaml"):
        default_template("my.yaml")


def test_an_older_spans_event_arriving_while_a_newer_span_trains_submits_nothing(profile, template_at_fake, fake):
    """Span 3's marker, then span 2's (storage delivers out of order, or span 2 was re-uploaded)."""
    assert handle(storage_event("reviews/span-3/_SUCCESS"), profile, template_at_fake, fake).submitted
    late = handle(storage_event("reviews/span-2/_SUCCESS"), profile, template_at_fake, fake)
    assert not late.submitted and "arrived after span 3, which is being trained" in late.decision.reason
    fake.jobs[0].state = aiplatform_v1.PipelineState.PIPELINE_STATE_SUCCEEDED
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
