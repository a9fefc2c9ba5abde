"""Retraining on Vertex AI: the trigger decision from Vertex pipeline jobs, and PipelineJobSchedules.

Vertex keeps the record: every run a trigger submits carries the labels `hftfx-pipeline` and `hftfx-span`,
and its job id is `<pipeline>-span-<N>-try-<attempt>`. Two triggers (or two storage events of one span) that
decide together build the same id, and Vertex refuses the second with AlreadyExists: exactly one run,
no lock to leave behind. Every request is built first, so --dry-run and the tests see exactly what is sent.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import zoneinfo
from pathlib import Path
from typing import Any

from components import run_parameters
from components.example_gen import spans
from pipeline.cloud import submit
from pipeline.cloud.vertex_jobs import api_endpoint
from pipeline.config.pipeline_config import ConfigError, PipelineConfig
from pipeline.retraining import decision

PIPELINE_LABEL, SPAN_LABEL, TRIGGER_LABEL = "hftfx-pipeline", "hftfx-span", "hftfx-trigger"
STORAGE_EVENT = "storage-event"  # the trigger label of runs a storage event started: its span is the bucket's word

# Vertex pipeline job states (google.cloud.aiplatform_v1.PipelineState) as decision outcomes.
_OUTCOMES = {
    "PIPELINE_STATE_SUCCEEDED": decision.COMPLETE,
    "PIPELINE_STATE_FAILED": decision.FAILED,
    "PIPELINE_STATE_CANCELLED": decision.FAILED,
}


@dataclasses.dataclass
class VertexClients:
    """The two Vertex AI services triggers talk to (gapic clients; tests pass recording fakes)."""

    pipelines: Any
    schedules: Any


def vertex_clients(config: PipelineConfig, credentials) -> VertexClients:
    from google.cloud import aiplatform_v1

    options = {"api_endpoint": api_endpoint(config.cloud)}
    return VertexClients(
        pipelines=aiplatform_v1.PipelineServiceClient(credentials=credentials, client_options=options),
        schedules=aiplatform_v1.ScheduleServiceClient(credentials=credentials, client_options=options),
    )


def label_value(text: str) -> str:
    """Vertex label values: lowercase letters, digits, '-' and '_', at most 63 characters."""
    return re.sub(r"[^a-z0-9_-]", "-", text.lower())[:63]


def job_id(config: PipelineConfig, span: int, attempt: int) -> str:
    return f"{label_value(config.pipeline_name)[:100]}-span-{span}-try-{attempt}"


def list_jobs_request(config: PipelineConfig):
    from google.cloud import aiplatform_v1

    return aiplatform_v1.ListPipelineJobsRequest(
        parent=submit.location_path(config),
        filter=f'labels.{PIPELINE_LABEL}="{label_value(config.pipeline_name)}"',
    )


def run_records(config: PipelineConfig, clients: VertexClients) -> list[decision.RunRecord]:
    """Past runs of this pipeline as Vertex records them (labels set by the trigger or a span submission)."""
    records = []
    for job in clients.pipelines.list_pipeline_jobs(request=list_jobs_request(config)):
        span = job.labels.get(SPAN_LABEL)
        state = getattr(job.state, "name", str(job.state))
        records.append(
            decision.RunRecord(
                run_id=job.name.rsplit("/", 1)[-1],
                span=int(span) if span is not None and span.isdigit() else None,
                outcome=_OUTCOMES.get(state, decision.RUNNING),
            )
        )
    return records


@dataclasses.dataclass
class CloudTriggerResult:
    decision: decision.Decision
    request: Any = None  # the CreatePipelineJobRequest built (sent unless dry-run or refused)
    submitted: bool = False
    cancelled: list[str] = dataclasses.field(default_factory=list)  # older spans' runs stopped for this one

    def lines(self, show_request: bool) -> list[str]:
        """The decision, then the request (`show_request`: a dry run's exact JSON) or the job it created."""
        lines = self.decision.lines()
        if self.request is not None and show_request:
            lines.append(json.dumps(submit.request_json(self.request), indent=2))
        elif self.submitted:
            lines.append(f"submitted: {self.request.parent}/pipelineJobs/{self.request.pipeline_job_id}")
        lines += [f"cancelled: {name} (an older span's run)" for name in self.cancelled]
        return lines


def span_job_request(config: PipelineConfig, template: str | Path, span: int, attempt: int, credentials, trigger: str):
    values = run_parameters.values(config, {"span": span})
    labels = {PIPELINE_LABEL: label_value(config.pipeline_name), SPAN_LABEL: str(span), TRIGGER_LABEL: trigger}
    job = submit.build_pipeline_job(
        config, template, values, credentials, job_id=job_id(config, span, attempt), labels=labels
    )
    return submit.create_job_request(job, config)


def cloud_trigger(
    config: PipelineConfig,
    template: str | Path,
    clients: VertexClients,
    credentials,
    *,
    span: int | None = None,
    trigger: str = "cli",
    dry_run: bool = False,
    ask_vertex: bool = True,
) -> CloudTriggerResult:
    """Decides from Vertex's runs and submits the span's run. `span` given (an event) skips discovery.

    `dry_run` builds the request and sends nothing; without `ask_vertex` past runs are not listed either
    (offline: the span is taken as new), so the exact request can be seen without credentials.
    """
    from google.api_core.exceptions import AlreadyExists

    if config.retraining.policy != "new_data":
        raise ConfigError(
            f"retraining.policy '{config.retraining.policy}' is local only for now: drift is measured against "
            "the blessed model's data in the local ML Metadata. Use policy new_data on Vertex."
        )
    records = run_records(config, clients) if ask_vertex else []
    if span is not None:
        chosen = decision.decide_event(span, records, config.retraining, from_storage=trigger == STORAGE_EVENT)
    else:
        chosen = decision.decide(spans.available_spans(config.dataset), records, config.retraining)
    if not ask_vertex:
        chosen = dataclasses.replace(chosen, reason=f"{chosen.reason} (dry run: past runs on Vertex not asked)")
    if not chosen.train:
        # A skip cancels too: a retried delivery, or an older span's event, still ends older runs in flight.
        stopped = cancel_superseded(config, clients, span) if ask_vertex and not dry_run else []
        return CloudTriggerResult(chosen, cancelled=stopped)
    request = span_job_request(config, template, chosen.span, chosen.attempt, credentials, trigger)
    if dry_run:
        return CloudTriggerResult(chosen, request)
    try:
        clients.pipelines.create_pipeline_job(request=request)
    except AlreadyExists:
        refused = decision.Decision(
            "skip", chosen.span, f"run {request.pipeline_job_id} was already submitted by a concurrent trigger"
        )
        return CloudTriggerResult(refused, request)
    return CloudTriggerResult(chosen, request, submitted=True, cancelled=cancel_superseded(config, clients, span))


def cancel_superseded(config: PipelineConfig, clients: VertexClients, event_span: int | None = None) -> list[str]:
    """Cancels this pipeline's runs of spans older than the newest consumed or in flight, read after this
    submission: two events handled at once both pass the check before either job exists, so whichever
    handler looks last cancels the older run. An event's span cancels only runs it is at most one span ahead of
    (decision.superseded_in_flight). Returns the names cancelled."""
    from google.api_core.exceptions import FailedPrecondition, NotFound

    cancelled = []
    for record in decision.superseded_in_flight(run_records(config, clients), event_span):
        name = f"{submit.location_path(config)}/pipelineJobs/{record.run_id}"
        try:
            clients.pipelines.cancel_pipeline_job(name=name)
            cancelled.append(name)
        except (FailedPrecondition, NotFound):  # it ended meanwhile, or another handler cancelled it
            continue
    return cancelled


# --- schedules -----------------------------------------------------------------------------------------

_CRON_FIELD = re.compile(r"^[0-9A-Za-z*/,\-?LW#]+$")


def forget_span(config: PipelineConfig, clients: VertexClients, span: int) -> list[str]:
    """Undoes a span that should never have run (a forged or mistaken marker): its runs are cancelled where still
    running and their records deleted, so no rule counts them again (the window, "already trained", "arrived
    after"). Their artifacts in the pipeline root stay. Returns what was done, a line per run."""
    from google.api_core.exceptions import FailedPrecondition, NotFound

    done = []
    for record in [r for r in run_records(config, clients) if r.span == span]:
        name = f"{submit.location_path(config)}/pipelineJobs/{record.run_id}"
        if record.outcome == decision.RUNNING:
            with contextlib.suppress(FailedPrecondition, NotFound):  # it ended meanwhile
                clients.pipelines.cancel_pipeline_job(name=name)
        try:
            clients.pipelines.delete_pipeline_job(name=name).result(timeout=300)
        except NotFound:
            continue
        except FailedPrecondition:  # Vertex is still cancelling it
            done.append(f"cancelling: {name} (run forget-span again once it has stopped)")
            continue
        done.append(f"forgotten: {name}")
    return done or [f"no run of span {span} to forget"]


def check_cron(cron: str) -> str:
    """Five cron fields, optionally after TZ=<zone> or CRON_TZ=<zone>, as Vertex schedules take them."""
    fields = cron.split()
    if fields and fields[0].startswith(("TZ=", "CRON_TZ=")):
        zone = fields[0].split("=", 1)[1]
        try:
            zoneinfo.ZoneInfo(zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ConfigError(
                f"--cron '{cron}': '{zone}' is not an IANA time zone (e.g. Europe/Paris, America/New_York, UTC)"
            ) from None
        fields = fields[1:]
    if len(fields) != 5 or not all(_CRON_FIELD.match(f) for f in fields):
        raise ConfigError(
            f"--cron '{cron}' is not a cron expression: give five fields (minute hour day month weekday), "
            "optionally after TZ=<IANA zone>, e.g. 'TZ=Europe/Paris 0 3 * * 1'"
        )
    return cron


def schedule_display_name(config: PipelineConfig) -> str:
    return f"{config.pipeline_name}-retrain"


def create_schedule_request(
    config: PipelineConfig,
    template: str | Path,
    cron: str,
    credentials,
    *,
    max_concurrent_runs: int = 1,
    max_runs: int | None = None,
    start_time: str | None = None,
    end_time: str | None = None,
):
    """A PipelineJobSchedule whose runs read the newest span (span 0) with caching off.

    Caching is off because a scheduled run passes the same parameters every time: with caching on, Vertex
    would reuse the first run's ExampleGen output and never read a newer span.
    """
    from google.cloud import aiplatform, aiplatform_v1

    values = run_parameters.values(config, {"span": 0})
    labels = {PIPELINE_LABEL: label_value(config.pipeline_name), TRIGGER_LABEL: "schedule"}
    job = submit.build_pipeline_job(config, template, values, credentials, labels=labels, enable_caching=False)
    sdk_schedule = aiplatform.PipelineJobSchedule(
        pipeline_job=job,
        display_name=schedule_display_name(config),
        credentials=credentials,
        project=config.cloud.project,
        location=config.cloud.region,
    )
    unsent = sdk_schedule._gca_resource
    schedule = aiplatform_v1.Schedule.deserialize(type(unsent).serialize(unsent))
    schedule.cron = check_cron(cron)
    schedule.max_concurrent_run_count = max_concurrent_runs
    if max_runs:
        schedule.max_run_count = max_runs
    if start_time:
        schedule.start_time = start_time
    if end_time:
        schedule.end_time = end_time
    if config.cloud.service_account:
        schedule.create_pipeline_job_request.pipeline_job.service_account = config.cloud.service_account
    if config.cloud.network:
        schedule.create_pipeline_job_request.pipeline_job.network = config.cloud.network
    return aiplatform_v1.CreateScheduleRequest(parent=submit.location_path(config), schedule=schedule)


def list_schedules_request(config: PipelineConfig):
    from google.cloud import aiplatform_v1

    return aiplatform_v1.ListSchedulesRequest(
        parent=submit.location_path(config), filter=f'display_name="{schedule_display_name(config)}"'
    )


def schedule_name(config: PipelineConfig, name_or_id: str) -> str:
    """A schedule's full resource name from itself or its numeric id."""
    if name_or_id.startswith("projects/"):
        return name_or_id
    if not name_or_id.isdigit():
        raise ConfigError(f"'{name_or_id}' is neither a schedule id nor projects/.../schedules/<id>")
    return f"{submit.location_path(config)}/schedules/{name_or_id}"


def schedule_action_request(config: PipelineConfig, action: str, name_or_id: str):
    from google.cloud import aiplatform_v1

    kinds = {
        "pause": aiplatform_v1.PauseScheduleRequest,
        "resume": aiplatform_v1.ResumeScheduleRequest,
        "delete": aiplatform_v1.DeleteScheduleRequest,
    }
    return kinds[action](name=schedule_name(config, name_or_id))


def send_schedule_request(clients: VertexClients, request):
    """Sends one schedule request with the method its type names (create/list/pause/resume/delete)."""
    method = {
        "CreateScheduleRequest": "create_schedule",
        "ListSchedulesRequest": "list_schedules",
        "PauseScheduleRequest": "pause_schedule",
        "ResumeScheduleRequest": "resume_schedule",
        "DeleteScheduleRequest": "delete_schedule",
    }[type(request).__name__]
    return getattr(clients.schedules, method)(request=request)


def schedule_command(
    config: PipelineConfig,
    action: str,
    clients: VertexClients,
    credentials,
    *,
    template: str | Path | None = None,
    cron: str | None = None,
    schedule: str | None = None,
    max_concurrent_runs: int = 1,
    max_runs: int | None = None,
    dry_run: bool = False,
) -> list[str]:
    """`hftfx schedule ACTION`: builds the request, sends it unless `dry_run`; the lines to print."""
    if action == "create":
        if not cron:
            raise ConfigError("schedule create needs --cron, e.g. --cron 'TZ=UTC 0 3 * * 1'")
        request = create_schedule_request(
            config, template, cron, credentials, max_concurrent_runs=max_concurrent_runs, max_runs=max_runs
        )
    elif action == "list":
        request = list_schedules_request(config)
    else:
        if not schedule:
            raise ConfigError(f"schedule {action} needs the schedule id or resource name")
        request = schedule_action_request(config, action, schedule)
    if dry_run:
        return [json.dumps(submit.request_json(request), indent=2)]
    response = send_schedule_request(clients, request)
    if action == "list":
        return [f"{s.name}  {s.state.name:<10} cron '{s.cron}'  next {s.next_run_time}" for s in response]
    if action == "create":
        return [f"created {response.name} (cron '{response.cron}')"]
    return [f"{action}: {request.name}"]
