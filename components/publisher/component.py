"""HFPublisher: a blessed model's Hugging Face export, with its model card, as an artifact; optionally on a Hub.

The Trainer writes the HF format beside the SavedModel (models/serving/hf_export.py); this component, after the
Evaluator, publishes it only when the model is blessed: it copies the export into its `hf_model` artifact,
writes README.md (the card, components/publisher/model_card.py) from the run's records, and, with `hub.repo_id` set,
pushes the folder to the Hub as a commit tagged with the run id (components/publisher/hub_push.py). An unblessed model
gets an artifact marked `published` 0 and nothing else. (tfx-addons' HF pusher pins TFX < 1.11.)
"""

from __future__ import annotations

from tfx import types
from tfx.dsl.components.base import base_component, executor_spec
from tfx.types import artifact, component_spec, standard_artifacts

from components.publisher.card_facts import SECTIONS, CardSections
from components.publisher.executor import Executor, section_parameter


class HuggingFaceModel(artifact.Artifact):
    """A model folder in the Hugging Face layout (config.json, weights, tokenizer files, README.md)."""

    # A Kubeflow v2 schema title (TFX's compiler takes only <namespace>.<Name>) that TFX's entrypoint imports
    # the class from: components/__init__.py provides it.
    TYPE_NAME = "components.HuggingFaceModel"


class HFPublisherSpec(types.ComponentSpec):
    PARAMETERS = {  # noqa: RUF012
        "pipeline_name": component_spec.ExecutionParameter(type=str),
        "model_name": component_spec.ExecutionParameter(type=str),
        # each section as JSON
        **{section_parameter(name): component_spec.ExecutionParameter(type=str) for name in SECTIONS},
    }
    INPUTS = {  # noqa: RUF012
        "model": component_spec.ChannelParameter(type=standard_artifacts.Model),
        "model_blessing": component_spec.ChannelParameter(type=standard_artifacts.ModelBlessing),
        "evaluation": component_spec.ChannelParameter(type=standard_artifacts.ModelEvaluation),
        "examples": component_spec.ChannelParameter(type=standard_artifacts.Examples),
        "statistics": component_spec.ChannelParameter(type=standard_artifacts.ExampleStatistics),
        "model_run": component_spec.ChannelParameter(type=standard_artifacts.ModelRun),
    }
    OUTPUTS = {"hf_model": component_spec.ChannelParameter(type=HuggingFaceModel)}  # noqa: RUF012


class HFPublisher(base_component.BaseComponent):
    """Publishes a blessed model in the Hugging Face layout with its card; pushes it to a Hub if configured."""

    SPEC_CLASS = HFPublisherSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)

    def __init__(self, *, model, model_blessing, evaluation, examples, statistics, model_run, sections: CardSections):
        super().__init__(
            spec=HFPublisherSpec(
                model=model,
                model_blessing=model_blessing,
                evaluation=evaluation,
                examples=examples,
                statistics=statistics,
                model_run=model_run,
                pipeline_name=sections.pipeline_name,
                model_name=sections.model_name,
                **{section_parameter(name): getattr(sections, name).model_dump_json() for name in SECTIONS},
                hf_model=types.Channel(type=HuggingFaceModel),
            )
        )
