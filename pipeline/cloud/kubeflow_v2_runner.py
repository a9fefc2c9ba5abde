"""Compiles the pipeline for Vertex AI Pipelines / Kubeflow Pipelines into pipeline.yaml, offline.

Component code is named by module path (`components.trainer.run_fn`, ...), so compiling builds no wheel
and needs no network; the image named by the cloud profile must contain this package (see Dockerfile).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml
from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner

from models.task import TASK_KEY_PROPERTY
from pipeline.cloud.profile import trainer_image
from pipeline.configs import ConfigError, PipelineConfig
from pipeline.orchestration.dag import BASELINE_RESOLVER, TRAINER, create_cloud_pipeline, task_of
from pipeline.run_parameters import runtime_parameters

PIPELINE_YAML = "pipeline.yaml"
RETRAINING_PIPELINE_YAML = "pipeline-retraining.yaml"
KUBEFLOW_PIPELINE_YAML = "pipeline-kubeflow.yaml"
# The committed specs and the profile each is compiled from: a command's default spec follows its config, so
# `hftfx schedule` and the storage-event handler never send a spec compiled from another dataset.
COMPILED_PROFILES = {
    "configs/vertex.yaml": PIPELINE_YAML,
    "configs/vertex-retraining.yaml": RETRAINING_PIPELINE_YAML,
    "configs/kubeflow.yaml": KUBEFLOW_PIPELINE_YAML,
}


def default_template(config_path: str) -> str:
    """The committed spec compiled from config_path; other configs name theirs."""
    template = COMPILED_PROFILES.get(str(Path(config_path)))
    if template is None:
        raise ConfigError(
            f"no compiled spec is committed for {config_path}: compile one with "
            f"`hftfx compile --config {config_path} --output FILE` and pass --template FILE"
        )
    return template


def images(config: PipelineConfig) -> dict[str, str]:
    """Per-component images: the Trainer's may differ (a TPU build with libtpu), the rest share one."""
    return {
        kubeflow_v2_dag_runner._DEFAULT_IMAGE_PATH_KEY: config.cloud.image_uri,
        TRAINER: trainer_image(config.cloud),
    }


def compile_spec(config: PipelineConfig) -> dict:
    """The PipelineSpec (KFP IR, schema 2.1) with the runtime parameters' defaults from the config."""
    runner = kubeflow_v2_dag_runner.KubeflowV2DagRunner(
        config=kubeflow_v2_dag_runner.KubeflowV2DagRunnerConfig(
            default_image=images(config),
            display_name=config.pipeline_name,
            use_pipeline_spec_2_1=True,  # typed parameters, read by Vertex AI and KFP 2
        ),
        output_dir=".",
    )
    run = runtime_parameters(config)
    spec = runner.run(create_cloud_pipeline(config, run), write_out=False)["pipelineSpec"]
    # TFX leaves the defaults out of the spec: put them on the inputs, so a run started from the console or
    # by a schedule needs no values.
    defaults = {p.name: p.default for p in (getattr(run, f.name) for f in dataclasses.fields(run))}
    for name, definition in spec["root"].get("inputDefinitions", {}).get("parameters", {}).items():
        if name in defaults:
            definition["defaultValue"] = defaults[name]
            definition["isOptional"] = True
    scope_baseline_to_task(spec, task_of(config).key)
    return spec


def scope_baseline_to_task(spec: dict, task_key: str) -> None:
    """Narrows the compiled latest-blessing query to blessings of this task (the Evaluator writes the key on
    each blessing): what SameTaskLatestBlessedModelStrategy does locally, as Vertex's ML Metadata filter.
    TFX compiles only its own strategy class, into this query."""
    executors = spec["deploymentSpec"]["executors"]
    for label, executor in executors.items():
        queries = executor.get("resolver", {}).get("outputArtifactQueries", {})
        if label.startswith(BASELINE_RESOLVER) and "model_blessing" in queries:
            query = queries["model_blessing"]
            query["filter"] += f' AND metadata.{TASK_KEY_PROPERTY}.string_value="{task_key}"'


def compile_pipeline(config: PipelineConfig, output: str | Path = PIPELINE_YAML) -> dict:
    """Writes the pipeline template (YAML, as `kfp` compiles it) to `output`; returns the spec."""
    spec = compile_spec(config)
    header = (
        f"# PIPELINE DEFINITION\n# Name: {spec['pipelineInfo']['name']}\n"
        "# Compiled by `hftfx compile` from the config's cloud profile; do not edit by hand.\n"
    )
    Path(output).write_text(header + yaml.safe_dump(spec, sort_keys=True), encoding="utf-8")
    return spec
