import pytest
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform_v1

from models.errors import UserError
from models.task import TaskContract, write_contract
from pipeline.config import pipeline_config
from pipeline.monitoring.monitor import ReferenceRun, reference_run
from tests import fake_vertex

STATE = aiplatform_v1.PipelineState
SUCCEEDED, FAILED = STATE.PIPELINE_STATE_SUCCEEDED, STATE.PIPELINE_STATE_FAILED
PARENT = "projects/my-gcp-project/locations/us-central1"


def _job(job_id: str, state, outputs: dict[str, tuple[str, str]], pipeline: str = "hf-text-classifier"):
    """A PipelineJob as Vertex records it: each task's output artifacts (task -> (output key, uri))."""
    artifact_list = aiplatform_v1.PipelineTaskDetail.ArtifactList
    tasks = [
        aiplatform_v1.PipelineTaskDetail(
            task_name=task, outputs={key: artifact_list(artifacts=[aiplatform_v1.Artifact(uri=uri)])}
        )
        for task, (key, uri) in outputs.items()
    ]
    return aiplatform_v1.PipelineJob(
        name=f"{PARENT}/pipelineJobs/{job_id}",
        state=state,
        pipeline_spec={"pipelineInfo": {"name": pipeline}},
        job_detail=aiplatform_v1.PipelineJobDetail(task_details=tasks),
    )


def test_a_model_trained_on_vertex_is_compared_with_the_examples_of_the_run_that_wrote_it(tmp_path, monkeypatch):
    """No local ML Metadata: the newest succeeded run of the pipeline whose artifacts hold the served folder, found
    through Vertex's PipelineService (a fake at the wire); a sibling folder's name, a failed run and another
    pipeline do not count."""
    root = tmp_path / "pipeline-root" / "123"
    model = root / "job-2" / "Trainer_5" / "model" / "Format-Serving"
    write_contract(str(model), TaskContract("single_label", ("rotten", "fresh"), ("text",)))
    fake = fake_vertex.FakeVertex()
    fake.jobs.extend([
        _job("job-1", SUCCEEDED, {"Trainer": ("model", f"{root}/job-2/Trainer_5/mod"), "ExampleGen": ("examples", "gs://b/1")}),
        _job("job-2", SUCCEEDED, {"Trainer": ("model", f"{root}/job-2/Trainer_5/model"), "ExampleGen": ("examples", "gs://b/2")}),
        _job("job-3", FAILED, {"Trainer": ("model", f"{root}/job-2/Trainer_5/model"), "ExampleGen": ("examples", "gs://b/3")}),
        _job("other", SUCCEEDED, {"Trainer": ("model", str(root)), "ExampleGen": ("examples", "gs://b/o")}, "another"),
    ])  # fmt: skip
    overrides = {"pipeline_root": str(tmp_path / "no-runs"), "cloud": {"project": "my-gcp-project"}}
    config = pipeline_config.load_config(overrides=overrides)
    with fake_vertex.serve(fake) as address, fake_vertex.plaintext_channels(monkeypatch, address):
        client = aiplatform_v1.PipelineServiceClient(
            credentials=AnonymousCredentials(), client_options={"api_endpoint": address}
        )
        run, note = reference_run(config, "Format-Serving", str(model), client)
        assert run == ReferenceRun("job-2", "gs://b/2", ("rotten", "fresh"), "single_label")
        assert note == " (Vertex AI's record of the run)"
        refused = r"no succeeded run of hf-text-classifier on Vertex AI .* wrote \S*/elsewhere"
        with pytest.raises(UserError, match=refused):
            reference_run(config, "Format-Serving", str(tmp_path / "elsewhere"), client)
    local = pipeline_config.load_config(overrides={"pipeline_root": str(tmp_path / "no-runs")})
    with pytest.raises(UserError, match=r"no blessed run in .* \(its cloud profile, for a run on Vertex AI\)"):
        reference_run(local, "Format-Serving", str(model))
