"""The retraining schedules and the cloud trigger on Vertex, request by request (the requests built by the real
GAPIC clients, parsed by the fake Vertex API as aiplatform_v1 protos)."""

import json

import pytest
from google.auth.credentials import AnonymousCredentials

from pipeline import cli
from pipeline.cloud import submit
from pipeline.cloud.compiled_specs import default_template
from pipeline.cloud.kubeflow_v2_runner import compile_pipeline
from pipeline.config import pipeline_config
from pipeline.retraining import vertex
from tests.vertex_retraining import PARENT, PROFILE, ROOT, at, clients, job


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


def test_forget_span_needs_the_cloud_and_a_span(capsys):
    assert cli.main(["trigger", "forget-span", "--span", "7"]) == 2
    assert "forget-span undoes a storage event's span on Vertex (--cloud)" in capsys.readouterr().err
    assert cli.main(["trigger", "forget-span", "--cloud"]) == 2
    assert "forget-span needs --span N" in capsys.readouterr().err
