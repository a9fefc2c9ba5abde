"""What a compiled pipeline takes per run without recompiling, declared once.

Each parameter overrides one config value. The compiled spec declares them as TFX RuntimeParameters (typed,
defaulting to the config's values), `hftfx submit --param` and the retraining trigger send values for them,
the local runner uses the config's values, and the components receive them as their own execution
parameters (TFX has no runtime parameter inside `custom_config`, hence the Trainer's two extra parameters).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from models.config_section import ConfigError

PipelineConfig = Any  # pipeline/config/pipeline_config.py, which composes this layer's sections (not imported upward)


@dataclasses.dataclass(frozen=True)
class RunParameter:
    name: str
    ptype: type
    config_key: str  # "section.field" of the config value it overrides

    @property
    def section_field(self) -> tuple[str, str]:
        section, field = self.config_key.split(".")
        return section, field

    def default(self, config: PipelineConfig) -> Any:
        section, field = self.section_field
        value = getattr(getattr(config, section), field)
        if self.ptype is str:  # a pipeline parameter cannot be None; a number is sent as its text
            return "" if value is None else str(value)
        return value


SPAN = RunParameter("span", int, "dataset.span")
DATASET_REVISION = RunParameter("dataset_revision", str, "dataset.revision")
EPOCHS = RunParameter("epochs", str, "training.epochs")  # text: a number, or auto (the Trainer chooses)
LEARNING_RATE = RunParameter("learning_rate", str, "training.learning_rate")  # text: a rate, or auto (as epochs)
RUN_PARAMETERS = (SPAN, DATASET_REVISION, EPOCHS, LEARNING_RATE)
NAMES = tuple(p.name for p in RUN_PARAMETERS)

# What create_components receives per parameter: a RuntimeParameter when compiling, None for the config's value.
RunParameters = dataclasses.make_dataclass(
    "RunParameters", [(name, Any, dataclasses.field(default=None)) for name in NAMES], frozen=True
)


def runtime_parameters(config: PipelineConfig) -> RunParameters:
    """The TFX RuntimeParameters of a compiled pipeline, defaulting to the config's values."""
    from tfx import v1 as tfx

    return RunParameters(
        **{
            p.name: tfx.dsl.experimental.RuntimeParameter(name=p.name, ptype=p.ptype, default=p.default(config))
            for p in RUN_PARAMETERS
        }
    )


def values(config: PipelineConfig, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every parameter's value for one run, as its declared type: the config's, replaced by `overrides` (names
    checked). A value the config leaves `auto` is left out: the compiled spec's default applies (auto epochs and
    learning rate, which the Trainer chooses)."""
    unknown = sorted(set(overrides or {}) - set(NAMES))
    if unknown:
        raise ConfigError(f"unknown pipeline parameter(s) {unknown}; the compiled pipeline takes {list(NAMES)}")
    configured = {p.name: p.default(config) for p in RUN_PARAMETERS if p.default(config) != "auto"}
    given = {p.name: p.ptype(overrides[p.name]) for p in RUN_PARAMETERS if p.name in (overrides or {})}
    return configured | given
