"""The ExampleValidator the DAG builds: TFX's, whose executor stops the run on anomalies (executor.py)."""

from __future__ import annotations

from tfx.components.example_validator import component as validator_component
from tfx.dsl.components.base import executor_spec

from components.example_validator.executor import Executor


class StrictExampleValidator(validator_component.ExampleValidator):
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)
