"""The `retraining` config section: when `hftfx trigger` (and the cloud triggers) start a run.

In pipeline/config/ rather than in retraining/: every module of retraining/ reads the composed PipelineConfig.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from models.config_section import ConfigSection

Distance = Annotated[float, Field(gt=0, le=1)]


class RetrainingConfig(ConfigSection):
    """When `hftfx trigger` retrains: on every new span, on a new span whose data drifted, or on a new span once the
    served traffic drifted."""

    policy: Literal["new_data", "drift", "serving_drift"] = Field(
        "new_data",
        description="new_data: every new span; drift: a new span whose data drifted past the bounds; serving_drift: "
        "a new span once `hftfx monitor` found the served model's traffic drifted (reports in monitor_reports); "
        "unlabeled traffic alone never trains",
    )
    monitor_reports: str = Field(
        "",
        description="serving_drift: the folder `hftfx monitor` writes its reports to (<its --logs>/monitor)",
    )
    max_attempts: int = Field(3, ge=1, description="failed or interrupted runs of one span before triggers stop")
    event_service_account: str = Field(
        "",
        description="the storage-event function's own identity: it runs as it and Eventarc calls it with it "
        "(`hftfx function-source` needs one; `hftfx doctor --cloud` lists its roles)",
    )
    max_span_gap: int = Field(
        100_000,
        ge=0,
        description="storage events: a span more than this above the newest span a complete run consumed (with "
        "none yet: above first_span) is refused, not trained (a stray or forged span-99999999 marker would "
        "otherwise cancel every run and refuse every real span after it); fits counters and YYYYMMDD dates, raise "
        "it for finer time stamps; 0: no limit (and no first_span rule)",
    )
    first_span: int = Field(
        1,
        ge=1,
        description="storage events: the span a deployment with no runs yet starts from; any other span's marker "
        "is refused until a run exists (set it to your first span's number, e.g. a date)",
    )
    marker_metadata: dict[str, str] = Field(
        default_factory=dict,
        description="storage events: custom metadata the producer sets on each ready marker (e.g. "
        "{hftfx-producer: reviews-etl}); a marker re-read by its generation without it is refused. The marker is "
        "always re-read by the event's generation: an event for an object that is not there starts nothing",
    )
    poll_seconds: float = Field(300.0, gt=0, description="hftfx trigger watch's interval")
    max_label_linf: Distance = Field(
        0.1, description="drift bound: L-infinity distance of the label distribution (TFDV), new span vs trained"
    )
    max_text_length_jsd: Distance = Field(0.1, description="drift bound: Jensen-Shannon divergence of text lengths")
    max_token_count_jsd: Distance = Field(0.1, description="drift bound: Jensen-Shannon divergence of token counts")

    @model_validator(mode="after")
    def _reports_for_serving_drift(self):
        if self.policy == "serving_drift" and not self.monitor_reports:
            raise ValueError(
                "retraining.policy serving_drift reads `hftfx monitor`'s reports: set retraining.monitor_reports "
                "to <the monitor's --logs folder>/monitor"
            )
        return self
