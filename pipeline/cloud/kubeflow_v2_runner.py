"""Compiles the pipeline for Vertex AI Pipelines / Kubeflow Pipelines into pipeline.yaml, offline.

Component code is named by module path (`components.trainer.module.run_fn`, ...), so compiling builds no wheel
and needs no network; the image named by the cloud profile must contain this package (see Dockerfile).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml
from tfx import v1 as tfx
from tfx.dsl.components.base import base_node
from tfx.orchestration import pipeline as tfx_pipeline
from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner

from components.notifier.component import RunNotifier
from components.run_parameters import RunParameters, runtime_parameters
from components.task_records import BASELINE_SCOPE_PROPERTY
from models.task import TASK_KEY_PROPERTY
from pipeline.cloud.compiled_specs import PIPELINE_YAML, profile_header
from pipeline.cloud.profile import validate_cloud
from pipeline.cloud.vertex_jobs import (
    api_endpoint,
    beam_args,
    container_env,
    notify_topic_path,
    on_vertex,
    trainer_image,
    vertex_serving_config,
    vertex_training_config,
    vertex_tuning_config,
)
from pipeline.config.node_ids import BASELINE_RESOLVER, EVALUATOR, TRAINER, TUNER
from pipeline.config.pipeline_config import PipelineConfig
from pipeline.orchestration.choose import with_model_pinned, with_recipe_chosen
from pipeline.orchestration.dag import CloudPlacement, create_components


def images(config: PipelineConfig) -> dict[str, str]:
    """Per-component images. On Vertex AI the Trainer task is a launcher on a CPU VM that creates and polls
    the CustomJob: it runs the pipeline image, and only the CustomJob's worker pool runs the trainer image
    (a TPU image's TensorFlow would wait for TPU chips at import in the launcher). On Kubeflow the Trainer
    trains in its own pod, so that pod runs the trainer image."""
    trainer = config.cloud.image_uri if on_vertex(config.cloud) else trainer_image(config.cloud)
    # The Tuner's trials train as the Trainer does: in its pod on Kubeflow, in a CustomJob on Vertex.
    return {kubeflow_v2_dag_runner._DEFAULT_IMAGE_PATH_KEY: config.cloud.image_uri, TRAINER: trainer, TUNER: trainer}


def cloud_placement(config: PipelineConfig) -> CloudPlacement:
    """The profile's placement of the DAG's parts: a Vertex CustomJob and endpoint, or Kubeflow pods."""
    if not on_vertex(config.cloud):
        return CloudPlacement(vertex=False)
    endpoint = vertex_serving_config(config.cloud) if config.cloud.push_to == "endpoint" else None
    return CloudPlacement(
        vertex=True,
        training_config=vertex_training_config(config.cloud, container_env(config)),
        tuning_config=vertex_tuning_config(config.cloud, container_env(config)),
        serving_config=endpoint,
    )


def create_cloud_pipeline(config: PipelineConfig, run: RunParameters) -> tfx_pipeline.Pipeline:
    """The local run's DAG placed for Vertex AI Pipelines / Kubeflow: gs:// root, Vertex training, cloud Beam. The
    profile is validated by compile_spec, its one caller, before the model is read."""
    return tfx.dsl.Pipeline(
        pipeline_name=config.pipeline_name,
        pipeline_root=config.cloud.pipeline_root,
        components=create_components(config, cloud=cloud_placement(config), run=run),
        enable_cache=config.cloud.enable_caching,
        beam_pipeline_args=beam_args(config),
    )


def compile_spec(config: PipelineConfig) -> dict:
    """The PipelineSpec (KFP IR, schema 2.1) with the runtime parameters' defaults from the config (its recipe's
    `auto` settings chosen from the model)."""
    validate_cloud(config)  # before the model is read: a profile naming a model the cloud cannot reach stops here
    config = with_recipe_chosen(with_model_pinned(config))
    runner = kubeflow_v2_dag_runner.KubeflowV2DagRunner(
        config=kubeflow_v2_dag_runner.KubeflowV2DagRunnerConfig(
            default_image=images(config),
            display_name=config.pipeline_name,
            use_pipeline_spec_2_1=True,  # typed parameters, read by Vertex AI and KFP 2
        ),
        output_dir=".",
    )
    if config.cloud.notify_topic:
        runner.set_exit_handler(run_notifier(config))
    run = runtime_parameters(config)
    spec = runner.run(create_cloud_pipeline(config, run), write_out=False)["pipelineSpec"]
    # TFX leaves the defaults out of the spec: put them on the inputs, so a run started from the console or
    # by a schedule needs no values.
    defaults = {p.name: p.default for p in (getattr(run, f.name) for f in dataclasses.fields(run))}
    for name, definition in spec["root"].get("inputDefinitions", {}).get("parameters", {}).items():
        if name in defaults:
            definition["defaultValue"] = defaults[name]
            definition["isOptional"] = True
    scope_baseline_to_task(spec, config.dataset.task_contract().key, config.pipeline_name)
    set_container_env(spec, container_env(config))
    return spec


def run_notifier(config: PipelineConfig) -> base_node.BaseNode:
    """The exit step that publishes each run's outcome to cloud.notify_topic (components/notifier/component.py)."""
    return RunNotifier(
        final_status_json=tfx.orchestration.experimental.FinalStatusStr(),
        topic=notify_topic_path(config.cloud),
        pipeline=config.pipeline_name,
        evaluator=EVALUATOR,
        api_endpoint=api_endpoint(config.cloud) if on_vertex(config.cloud) else "",
    )


def set_container_env(spec: dict, env: dict[str, str]) -> None:
    """`env` in every container task of the spec (KFP's PipelineContainerSpec.env): TFX compiles none."""
    if not env:
        return
    for executor in spec["deploymentSpec"]["executors"].values():
        if "container" in executor:
            executor["container"]["env"] = [{"name": name, "value": value} for name, value in env.items()]


def scope_baseline_to_task(spec: dict, task_key: str, pipeline_name: str) -> None:
    """Narrows the compiled latest-blessing query to blessings of this task and pipeline (the Evaluator writes
    both on each blessing): what SameTaskLatestBlessedModelStrategy and the local pipeline context do locally,
    as Vertex's ML Metadata filter, whose store holds every pipeline of the project and region. TFX compiles
    only its own strategy class, into this query."""
    executors = spec["deploymentSpec"]["executors"]
    for label, executor in executors.items():
        queries = executor.get("resolver", {}).get("outputArtifactQueries", {})
        if label.startswith(BASELINE_RESOLVER) and "model_blessing" in queries:
            query = queries["model_blessing"]
            query["filter"] += (
                f' AND metadata.{TASK_KEY_PROPERTY}.string_value="{task_key}"'
                f' AND metadata.{BASELINE_SCOPE_PROPERTY}.string_value="{pipeline_name}"'
            )


def compile_pipeline(config: PipelineConfig, output: str | Path = PIPELINE_YAML) -> dict:
    """Writes the pipeline template (YAML, as `kfp` compiles it) to `output`; returns the spec. Its header lists
    the settings as the config gives them (`auto` included): what submit and the retraining trigger compare
    their own config with."""
    spec = compile_spec(config)
    header = (
        f"# PIPELINE DEFINITION\n# Name: {spec['pipelineInfo']['name']}\n"
        "# Compiled by `hftfx compile` from the config's cloud profile; do not edit by hand.\n"
        f"{profile_header(config)}"
    )
    Path(output).write_text(header + yaml.safe_dump(spec, sort_keys=True), encoding="utf-8")
    return spec
