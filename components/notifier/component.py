"""The exit step of a cloud run: publishes the run's outcome to a Pub/Sub topic, so unattended runs (scheduled,
started by a storage event) that fail or are not blessed tell someone.

TFX's exit handler runs after the whole DAG, whatever became of it, and receives the DAG's final status
(`PipelineTaskFinalStatus`, as JSON). A run that succeeded may still have refused its model: on Vertex the
Evaluator's blessing is read from the run's own task details (GetPipelineJob). Kubeflow has no such API for
an exit step, so there a succeeded run is reported as succeeded with the blessing unread, and says so.
One message per run: JSON data, and `pipeline` / `outcome` attributes a subscription can filter on.
"""

# No `from __future__ import annotations`: TFX reads the component function's annotations as objects.
import dataclasses
import json
from typing import Any

from tfx import v1 as tfx

SUCCEEDED, NOT_BLESSED, FAILED, CANCELLED = "succeeded", "not_blessed", "failed", "cancelled"
_CONSOLE = "https://console.cloud.google.com/vertex-ai/locations/{location}/pipelines/runs/{job}?project={project}"


@dataclasses.dataclass(frozen=True)
class RunOutcome:
    pipeline: str
    outcome: str  # one of the four above
    reason: str
    job: str  # the run's resource name
    link: str  # where a person looks at the run ("" where there is no console)

    def message(self) -> tuple[bytes, dict[str, str]]:
        """(data, attributes) of the Pub/Sub message."""
        return json.dumps(dataclasses.asdict(self)).encode(), {"pipeline": self.pipeline, "outcome": self.outcome}


def final_status(value: Any) -> dict:
    """The PipelineTaskFinalStatus as a dict, whether the backend sent JSON text (what TFX documents) or a
    struct."""
    if isinstance(value, str):
        return json.loads(value or "{}")
    from google.protobuf import json_format

    return json_format.MessageToDict(value)


def console_link(job: str) -> str:
    """The Vertex console page of projects/<p>/locations/<l>/pipelineJobs/<id>; "" for anything else."""
    parts = job.split("/")
    if len(parts) != 6 or parts[0] != "projects" or parts[4] != "pipelineJobs":
        return ""
    return _CONSOLE.format(project=parts[1], location=parts[3], job=parts[5])


def blessing_of(job, evaluator: str) -> bool | None:
    """The Evaluator's verdict in a Vertex PipelineJob's task details; None when the Evaluator has no blessing
    (it did not run)."""
    for task in job.job_detail.task_details:
        if task.task_name == evaluator and "blessing" in task.outputs:
            for artifact in task.outputs["blessing"].artifacts:
                if "blessed" in artifact.metadata:
                    return bool(artifact.metadata["blessed"])
    return None


def outcome_of(pipeline: str, status: dict, blessed: bool | None, unread: str = "") -> RunOutcome:
    """What the run came to: its state, and for a succeeded run the Evaluator's verdict (`unread` says why it is
    unknown)."""
    job = status.get("pipelineJobResourceName", "")
    state = status.get("state", "")
    error = status.get("error", {}).get("message", "")
    if state == "SUCCEEDED" and blessed is False:
        found = RunOutcome(pipeline, NOT_BLESSED, "the Evaluator did not bless the model: nothing was pushed", job, "")
    elif state == "SUCCEEDED":
        reason = "the model was blessed and pushed" if blessed else f"the run succeeded; {unread or 'no blessing'}"
        found = RunOutcome(pipeline, SUCCEEDED, reason, job, "")
    elif state == "CANCELLED":
        found = RunOutcome(pipeline, CANCELLED, error or "the run was cancelled", job, "")
    else:
        found = RunOutcome(pipeline, FAILED, error or f"the run ended in state {state or 'unknown'}", job, "")
    return dataclasses.replace(found, link=console_link(job))


def read_blessing(job: str, api_endpoint: str, evaluator: str) -> tuple[bool | None, str]:
    """(blessed, why unknown) from Vertex's record of the run; any failure to read is a reason, not a crash:
    the notice must still go out."""
    if not api_endpoint:
        return None, "blessing not read (Kubeflow has no run API for an exit step: see the Evaluator's output)"
    from google.cloud import aiplatform_v1

    try:
        client = aiplatform_v1.PipelineServiceClient(client_options={"api_endpoint": api_endpoint})
        return blessing_of(client.get_pipeline_job(name=job), evaluator), ""
    except Exception as error:  # any failure to read becomes the notice's reason: the notice still goes out
        return None, f"blessing not read ({type(error).__name__}: {error})"


def publish(topic: str, outcome) -> str:
    """Sends `outcome.message()` (a RunOutcome's, or `hftfx monitor`'s report) with google-cloud-pubsub
    (PUBSUB_EMULATOR_HOST, its own setting, points it at an emulator); returns the message id."""
    from google.cloud import pubsub_v1

    data, attributes = outcome.message()
    return pubsub_v1.PublisherClient().publish(topic, data, **attributes).result(timeout=120)


@tfx.orchestration.experimental.exit_handler
def RunNotifier(
    final_status_json: tfx.dsl.components.Parameter[str],
    topic: tfx.dsl.components.Parameter[str],
    pipeline: tfx.dsl.components.Parameter[str],
    evaluator: tfx.dsl.components.Parameter[str],
    api_endpoint: tfx.dsl.components.Parameter[str] = "",
) -> None:
    """Publishes this run's outcome to `topic`; `api_endpoint` (Vertex's host) lets it read the blessing."""
    from absl import logging

    status = final_status(final_status_json)
    blessed, unread = (None, "")
    if status.get("state") == "SUCCEEDED":
        blessed, unread = read_blessing(status.get("pipelineJobResourceName", ""), api_endpoint, evaluator)
    outcome = outcome_of(pipeline, status, blessed, unread)
    logging.info(
        "run outcome %s: %s; message %s on %s", outcome.outcome, outcome.reason, publish(topic, outcome), topic
    )
