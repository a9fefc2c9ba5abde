"""The Tuner component: TFX's own, locally and in a Kubeflow pod; on Vertex AI, TFX's Vertex Tuner extension,
whose launcher starts one CustomJob with a worker per parallel trial (KerasTuner's chief oracle on the first).
The launcher here only points TFX's job client at the profile's API host, as the Vertex Trainer's does."""

from __future__ import annotations

from tfx.dsl.components.base import executor_spec
from tfx.extensions.google_cloud_ai_platform.tuner import component as vertex_tuner_component

from components.tuner.executor import VertexTunerExecutor

TUNER_FN = "components.tuner.module.tuner_fn"


class VertexHFTuner(vertex_tuner_component.Tuner):
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(VertexTunerExecutor)
