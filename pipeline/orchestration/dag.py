"""The TFX pipeline, top to bottom, as one `create_pipeline(config)` shared by every orchestrator."""

from __future__ import annotations

import dataclasses
from typing import Any

import tensorflow_data_validation as tfdv
from tfx import v1 as tfx
from tfx.orchestration import pipeline as tfx_pipeline

from components.evaluator import module as evaluation
from components.evaluator.component import SameTaskLatestBlessedModelStrategy, TaskEvaluator
from components.evaluator.config import threshold_per_label
from components.example_gen.component import HFDatasetExampleGen
from components.example_gen.spans import is_spanned
from components.example_validator.component import StrictExampleValidator
from components.publisher.card_facts import CardSections
from components.publisher.component import HFPublisher
from components.pusher.component import EndpointPusher, ServingPusher
from components.run_parameters import RunParameters
from components.scorer.component import BatchScorer
from components.task_records import BASELINE_SCOPE_PROPERTY
from components.trainer.component import HFTrainer, VertexHFTrainer
from components.trainer.config import TrainerSettings
from components.transform.config import TransformSettings
from components.tuner.component import TUNER_FN, VertexHFTuner
from components.tuner.config import TUNING_KEY
from models.errors import UserError
from models.training.warm_start import asks_for_blessed
from pipeline.config.node_ids import (
    BASELINE_RESOLVER,
    BATCH_SCORER,
    EVALUATOR,
    HF_PUBLISHER,
    PUSHER,
    TRAINER,
    TRANSFORMED_STATISTICS_GEN,
    TUNER,
)
from pipeline.config.pipeline_config import PipelineConfig

PREPROCESSING_FN = "components.transform.module.preprocessing_fn"
RUN_FN = "components.trainer.module.run_fn"
EVALUATOR_MODULE = "components.evaluator.module"


@dataclasses.dataclass(frozen=True)
class CloudPlacement:
    """Where the cloud runs each part, as pipeline/cloud/profile.py decides it from the profile: on Vertex AI the
    Trainer runs in a CustomJob (`training_config`) and `serving_config`, when given, deploys to an endpoint;
    on Kubeflow every component runs in its pod and there is no baseline resolver."""

    vertex: bool
    training_config: dict[str, Any] = dataclasses.field(default_factory=dict)
    tuning_config: dict[str, Any] = dataclasses.field(default_factory=dict)  # the Tuner's CustomJob, on Vertex
    serving_config: dict[str, Any] | None = None  # None: the filesystem push


def bounded_statistics_options() -> tfdv.StatsOptions:
    """TFDV options whose memory does not grow with the rows: top values and distinct counts by sketches.

    The exact top-k counts every distinct value of every string feature in one grouping, and every review's
    text is distinct, so on the DirectRunner the launching process would hold all the texts.
    """
    return tfdv.StatsOptions(use_sketch_based_topk_uniques=True)


class LabelSetUnknownError(UserError, ValueError):
    pass


def decision_thresholds(config: PipelineConfig) -> tuple[float, ...] | None:
    """Per label, in id order, for a multi-label run; None for one label per row."""
    if not config.dataset.multi_label:
        return None
    return threshold_per_label(config.evaluation, config.dataset.label_names)


@dataclasses.dataclass(frozen=True)
class DataComponents:
    """From the dataset to the model's inputs: read, describe, validate, tokenize, describe again."""

    example_gen: Any
    statistics_gen: Any
    schema_gen: Any
    example_validator: Any
    transform: Any
    transformed_statistics_gen: Any

    def in_order(self) -> list:
        return [
            self.example_gen,
            self.statistics_gen,
            self.schema_gen,
            self.example_validator,
            self.transform,
            self.transformed_statistics_gen,
        ]


def create_components(
    config: PipelineConfig,
    *,
    cloud: CloudPlacement | None = None,
    run: RunParameters | None = None,
    input_fingerprint: str = "",
) -> list:
    """The components in DAG order; `config.dataset.label_names` must be known (it sizes the metrics).

    `cloud` builds the DAG for the cloud profile's orchestrator (None: the local DAG).
    `input_fingerprint` (of the local files read) makes a changed file a new ExampleGen input.
    """
    run = run or RunParameters()
    if not config.dataset.label_names:
        raise LabelSetUnknownError(
            "dataset.label_names is empty: the Evaluator's metrics depend on the number of labels. Declare "
            "them in the config, or build the pipeline through `hftfx run`, which probes the dataset for them."
        )
    vertex = cloud is not None and cloud.vertex
    data = data_components(config, run, input_fingerprint)
    tuner = tuner_component(config, data, cloud.tuning_config if vertex else None)
    # Kubeflow's v2 backend runs no resolver nodes: there the Evaluator has no baseline and no retrain starts warm.
    resolver = baseline_resolver(config, vertex) if cloud is None or vertex else None
    warm = asks_for_blessed(config.training.warm_start, is_spanned(config.dataset))
    warm_from = resolver if resolver is not None and warm else None
    trainer = trainer_component(config, run, data, cloud.training_config if vertex else None, tuner, warm_from)
    evaluator = evaluator_component(config, data, trainer, resolver)
    pusher = pusher_component(config, trainer, evaluator, cloud.serving_config if vertex else None)
    publisher = publisher_component(config, data, trainer, evaluator)
    scorers = [scorer_component(config, trainer, evaluator)] if config.scoring.input else []
    resolvers = [resolver] if resolver else []
    tuners = [tuner] if tuner else []
    return [*data.in_order(), *tuners, *resolvers, trainer, evaluator, pusher, publisher, *scorers]


def data_components(config: PipelineConfig, run: RunParameters, input_fingerprint: str) -> DataComponents:
    # Reads the Hugging Face dataset into train/eval/test tf.Examples with int64 label ids.
    example_gen = HFDatasetExampleGen(
        dataset=config.dataset, span=run.span, revision=run.dataset_revision, input_fingerprint=input_fingerprint
    )
    # Statistics of every split: what the data looks like, and the input to schema and validation.
    statistics_gen = tfx.components.StatisticsGen(
        examples=example_gen.outputs["examples"], stats_options=bounded_statistics_options()
    )
    # The schema the rest of the pipeline relies on, inferred from the statistics.
    schema_gen = tfx.components.SchemaGen(statistics=statistics_gen.outputs["statistics"], infer_feature_shape=True)
    # Stops the run before training when a split breaks the schema (missing text, unseen label ids...).
    example_validator = StrictExampleValidator(
        statistics=statistics_gen.outputs["statistics"], schema=schema_gen.outputs["schema"]
    ).with_id("ExampleValidator")
    # Tokenizes in-graph: the same graph runs at serving time, so training and serving agree. Its own
    # statistics are off: TFX holds every transformed row until the write completes before computing them
    # (a side input), which on the DirectRunner is the whole dataset in the launching process.
    transform = tfx.components.Transform(
        examples=example_gen.outputs["examples"],
        schema=schema_gen.outputs["schema"],
        preprocessing_fn=PREPROCESSING_FN,
        disable_statistics=True,
        custom_config=TransformSettings(
            model=config.model,
            multi_label=config.dataset.multi_label,
            length_slice_edges=config.evaluation.length_slice_edges,
        ).to_custom_config(),
    )
    transform.add_upstream_node(example_validator)
    # Statistics of the model's inputs (token counts, truncation, [UNK]s), read back from the written files.
    transformed_statistics_gen = tfx.components.StatisticsGen(
        examples=transform.outputs["transformed_examples"], stats_options=bounded_statistics_options()
    ).with_id(TRANSFORMED_STATISTICS_GEN)
    return DataComponents(
        example_gen, statistics_gen, schema_gen, example_validator, transform, transformed_statistics_gen
    )


def trainer_settings(config: PipelineConfig) -> TrainerSettings:
    return TrainerSettings(
        config.model, config.training, config.dataset.label_names, config.dataset.multi_label,
        decision_thresholds(config) or (),
    )  # fmt: skip


def tuner_component(config: PipelineConfig, data: DataComponents, vertex_job: dict[str, Any] | None):
    """With tuning.trials: searches training settings before the Trainer, each trial fine-tuning as the Trainer
    does and scored on the eval split; the Trainer trains with the best trial's values. On Vertex, the trials run
    in one CustomJob, tuning.parallel_trials at a time."""
    if not config.tuning.enabled:
        return None
    tuner_config = {**trainer_settings(config).to_custom_config(), TUNING_KEY: config.tuning.model_dump(mode="json")}
    tuner_class, extra = tfx.components.Tuner, {}
    if vertex_job is not None:
        tuner_class, tuner_config = VertexHFTuner, {**tuner_config, **vertex_job}
        extra = {"tune_args": tfx.proto.TuneArgs(num_parallel_trials=config.tuning.parallel_trials)}
    return tuner_class(tuner_fn=TUNER_FN, **training_inputs(data), custom_config=tuner_config, **extra).with_id(TUNER)


def training_inputs(data: DataComponents) -> dict[str, Any]:
    """What the Tuner's trials and the Trainer train on: the transformed train and eval splits, their graph."""
    return {
        "examples": data.transform.outputs["transformed_examples"],
        "transform_graph": data.transform.outputs["transform_graph"],
        "schema": data.schema_gen.outputs["schema"],
        "train_args": tfx.proto.TrainArgs(splits=["train"]),
        "eval_args": tfx.proto.EvalArgs(splits=["eval"]),
    }


def trainer_component(
    config: PipelineConfig,
    run: RunParameters,
    data: DataComponents,
    vertex_job: dict[str, Any] | None,
    tuner=None,
    warm_from=None,
):
    """Fine-tunes the pretrained encoder and exports the SavedModel with its serving signatures (and the HF
    format); with `vertex_job`, in a Vertex AI CustomJob on the profile's machine; with a `tuner`, with its best
    trial's training values; with a baseline resolver `warm_from`, from the blessed model it resolves, if any
    (TFX's base_model input: ML Metadata links each model to the one it started from)."""
    scope = {BASELINE_SCOPE_PROPERTY: config.pipeline_name}
    trainer_class, trainer_config = HFTrainer, {**trainer_settings(config).to_custom_config(), **scope}
    if vertex_job is not None:
        trainer_class, trainer_config = VertexHFTrainer, {**trainer_config, **vertex_job}
    return trainer_class(
        epochs=run.epochs,
        learning_rate=run.learning_rate,
        run_fn=RUN_FN,
        **training_inputs(data),
        custom_config=trainer_config,
        hyperparameters=tuner.outputs["best_hyperparameters"] if tuner else None,
        base_model=warm_from.outputs["model"] if warm_from is not None else None,
    ).with_id(TRAINER)


def baseline_resolver(config: PipelineConfig, vertex: bool):
    """The latest blessed model of the same task, so a new model must not be worse than what serves now; with
    none, the run is the first of its task. Vertex compiles only TFX's own strategy class: the compiled query
    is scoped to the task there (pipeline/cloud/kubeflow_v2_runner.py)."""
    strategy = {
        "strategy_class": SameTaskLatestBlessedModelStrategy,
        "config": {"task_key": config.dataset.task_contract().key},
    }
    if vertex:
        strategy = {"strategy_class": tfx.dsl.experimental.LatestBlessedModelStrategy}
    return tfx.dsl.Resolver(
        **strategy,
        model=tfx.dsl.Channel(type=tfx.types.standard_artifacts.Model),
        model_blessing=tfx.dsl.Channel(type=tfx.types.standard_artifacts.ModelBlessing),
    ).with_id(BASELINE_RESOLVER)


def evaluator_component(config: PipelineConfig, data: DataComponents, trainer, resolver):
    """Measures the model on the held-out test split and blesses it only if it clears every threshold."""
    return TaskEvaluator(
        examples=data.example_gen.outputs["examples"],
        model=trainer.outputs["model"],
        baseline_model=resolver.outputs["model"] if resolver else None,
        eval_config=evaluation.eval_config(
            len(config.dataset.label_names), config.evaluation, decision_thresholds(config)
        ),
        example_splits=[evaluation.EVAL_SPLIT],
        module_path=EVALUATOR_MODULE,
    ).with_id(EVALUATOR)


def pusher_component(config: PipelineConfig, trainer, evaluator, endpoint: dict[str, Any] | None):
    """Copies a blessed model into the TF Serving layout (or deploys it to the Vertex `endpoint`); an unblessed
    model is never pushed."""
    if endpoint is not None:
        return EndpointPusher(
            model=trainer.outputs["model"], model_blessing=evaluator.outputs["blessing"], custom_config=endpoint
        ).with_id(PUSHER)
    return _filesystem_pusher(config, trainer, evaluator)


def publisher_component(config: PipelineConfig, data: DataComponents, trainer, evaluator):
    """The blessed model in the Hugging Face layout with its model card; pushed to a Hub when hub.repo_id is set."""
    return HFPublisher(
        model=trainer.outputs["model"],
        model_blessing=evaluator.outputs["blessing"],
        evaluation=evaluator.outputs["evaluation"],
        examples=data.example_gen.outputs["examples"],
        statistics=data.transformed_statistics_gen.outputs["statistics"],
        model_run=trainer.outputs["model_run"],
        sections=CardSections(
            config.pipeline_name,
            config.model_name,
            config.dataset,
            config.model,
            config.training,
            config.evaluation,
            config.hub,
        ),
    ).with_id(HF_PUBLISHER)


def scorer_component(config: PipelineConfig, trainer, evaluator):
    """Unlabeled rows scored by the blessed model (scoring.input): the `hftfx predict --input` job as a step."""
    return BatchScorer(
        model=trainer.outputs["model"],
        model_blessing=evaluator.outputs["blessing"],
        scoring=config.scoring.model_dump(mode="json"),
    ).with_id(BATCH_SCORER)


def _filesystem_pusher(config: PipelineConfig, trainer, evaluator):
    return ServingPusher(
        model=trainer.outputs["model"],
        model_blessing=evaluator.outputs["blessing"],
        push_destination=tfx.proto.PushDestination(
            filesystem=tfx.proto.PushDestination.Filesystem(base_directory=config.push_base_directory)
        ),
    ).with_id(PUSHER)


def create_pipeline(
    config: PipelineConfig, metadata_connection_config=None, input_fingerprint: str = ""
) -> tfx_pipeline.Pipeline:
    """The local pipeline: LocalDagRunner, ML Metadata in sqlite."""
    return tfx.dsl.Pipeline(
        pipeline_name=config.pipeline_name,
        pipeline_root=config.pipeline_root,
        components=create_components(config, input_fingerprint=input_fingerprint),
        enable_cache=config.enable_cache,
        metadata_connection_config=metadata_connection_config,
        beam_pipeline_args=list(config.beam_args),
    )
