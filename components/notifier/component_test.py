"""What a run's notice says, from the final status the backend sends and Vertex's record of the run."""

import json

from google.cloud import aiplatform_v1

from components.notifier.component import (
    FAILED,
    NOT_BLESSED,
    SUCCEEDED,
    blessing_of,
    console_link,
    final_status,
    outcome_of,
)

JOB = "projects/my-gcp-project/locations/us-central1/pipelineJobs/hf-text-classifier-20261126"


def _job(blessed: int | None) -> aiplatform_v1.PipelineJob:
    outputs = {}
    if blessed is not None:
        artifact = aiplatform_v1.Artifact(metadata={"blessed": blessed, "task_key": "k"})
        outputs["blessing"] = aiplatform_v1.PipelineTaskDetail.ArtifactList(artifacts=[artifact])
    tasks = [
        aiplatform_v1.PipelineTaskDetail(task_name="Trainer"),
        aiplatform_v1.PipelineTaskDetail(task_name="Evaluator", outputs=outputs),
    ]
    return aiplatform_v1.PipelineJob(name=JOB, job_detail=aiplatform_v1.PipelineJobDetail(task_details=tasks))


def test_the_blessing_is_read_from_the_evaluators_task_and_absent_when_it_never_ran():
    assert blessing_of(_job(1), "Evaluator") is True
    assert blessing_of(_job(0), "Evaluator") is False
    assert blessing_of(_job(None), "Evaluator") is None


def test_a_succeeded_run_that_refused_its_model_is_not_blessed_with_the_runs_link():
    outcome = outcome_of("hf-text-classifier", {"state": "SUCCEEDED", "pipelineJobResourceName": JOB}, False)
    assert outcome.outcome == NOT_BLESSED and "did not bless" in outcome.reason
    assert outcome.link == (
        "https://console.cloud.google.com/vertex-ai/locations/us-central1/pipelines/runs/"
        "hf-text-classifier-20261126?project=my-gcp-project"
    )
    data, attributes = outcome.message()
    assert json.loads(data)["job"] == JOB and attributes == {"pipeline": "hf-text-classifier", "outcome": NOT_BLESSED}


def test_a_failed_run_carries_the_backends_error_and_an_unread_blessing_says_why():
    status = {"state": "FAILED", "error": {"code": 9, "message": "Trainer: OOM"}, "pipelineJobResourceName": JOB}
    assert outcome_of("p", status, None).reason == "Trainer: OOM" and outcome_of("p", status, None).outcome == FAILED
    unread = outcome_of("p", {"state": "SUCCEEDED", "pipelineJobResourceName": "runs/7"}, None, "blessing not read (x)")
    assert (unread.outcome, unread.reason, unread.link) == (SUCCEEDED, "the run succeeded; blessing not read (x)", "")


def test_the_final_status_is_read_as_json_text_or_as_a_struct():
    from google.protobuf import struct_pb2

    as_struct = struct_pb2.Struct()
    as_struct.update({"state": "CANCELLED"})
    assert final_status('{"state": "CANCELLED"}') == final_status(as_struct) == {"state": "CANCELLED"}
    assert console_link("runs/7") == ""
