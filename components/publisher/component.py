"""HFPublisher: a blessed model's Hugging Face export, with its model card, as an artifact; optionally on a Hub.

The Trainer writes the HF format beside the SavedModel (models/serving/hf_export.py); this component, after the
Evaluator, publishes it only when the model is blessed: it copies the export into its `hf_model` artifact,
writes README.md (the card, components/publisher/model_card.py) from the run's records, and, with `hub.repo_id` set,
pushes the folder to the Hub as a commit tagged with the run id (components/publisher/hub_push.py). An unblessed model
gets an artifact marked `published` 0 and nothing else. (tfx-addons' HF pusher pins TFX < 1.11.)
"""

from __future__ import annotations

import collections
import json
import os
import tempfile
import unicodedata
from typing import Any

from absl import logging
from tfx import types
from tfx.dsl.components.base import base_component, base_executor, executor_spec
from tfx.types import artifact, artifact_utils, component_spec, standard_artifacts
from tfx.utils import io_utils

from components.evaluator.eval_results import blessing_reason, read_metrics
from components.publisher.config import HubConfig
from components.publisher.hub_push import HubRevision, push_folder, untagged_run_id
from components.publisher.model_card import CardFacts, build_model_card, parse_card
from components.trainer.training_record import TrainingRecord
from components.transform.tokenization_stats import tokenization_figures
from models.config_section import build_section
from models.names import (
    DROPPED_COUNTS_PROPERTY,
    LABEL_COUNTS_PROPERTY,
    SPLIT_COUNTS_PROPERTY,
    TEXT_FEATURE,
)
from models.serving.hf_export import HF_CONFIG, HF_FORMAT_DIR
from models.tokenizers.tokenizer import character_budget, tokenizer_spec

CARD_FILE = "README.md"
PUBLISHED_PROPERTY = "published"  # 1: the export and card are in the artifact; 0: the model was not blessed
HUB_URL_PROPERTY, HUB_COMMIT_PROPERTY, HUB_TAG_PROPERTY = "hub_url", "hub_commit", "hub_tag"
# The card's names of training settings the Tuner may choose (pipeline/publishing.py writes the config's).
CARD_NAMES = {"batch_size": "batch size", "learning_rate": "learning rate", "warmup_ratio": "warm-up ratio"}
SCRIPT_SAMPLE = 2000  # train texts whose letters are counted by Unicode script for the card


class HuggingFaceModel(artifact.Artifact):
    """A model folder in the Hugging Face layout (config.json, weights, tokenizer files, README.md)."""

    # A Kubeflow v2 schema title (TFX's compiler takes only <namespace>.<Name>) that TFX's entrypoint imports
    # the class from: components/__init__.py provides it.
    TYPE_NAME = "components.HuggingFaceModel"


class HFPublisherSpec(types.ComponentSpec):
    PARAMETERS = {  # noqa: RUF012
        "card_facts": component_spec.ExecutionParameter(type=str),  # JSON: the config's part of CardFacts
        "hub": component_spec.ExecutionParameter(type=str),  # JSON: HubConfig
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


def _custom_json(item, name: str, default):
    value = item.get_string_custom_property(name)
    return json.loads(value) if value else default


def scripts_seen(examples_uri: str, sample: int = SCRIPT_SAMPLE) -> dict[str, float]:
    """Share of letters per Unicode script (LATIN, CYRILLIC, CJK ...) in the first `sample` train texts: the
    card's 'languages seen', as far as a script tells them apart."""
    import tensorflow as tf

    files = tf.io.gfile.glob(os.path.join(examples_uri, "Split-train", "*"))
    counts: collections.Counter[str] = collections.Counter()
    for record in tf.data.TFRecordDataset(files, compression_type="GZIP").take(sample):
        example = tf.train.Example.FromString(record.numpy())
        for text in example.features.feature[TEXT_FEATURE].bytes_list.value:
            for char in text.decode("utf-8", "replace"):
                if char.isalpha():
                    counts[unicodedata.name(char, "UNKNOWN").split()[0]] += 1
    total = sum(counts.values())
    return {script: n / total for script, n in counts.most_common(5) if n / total >= 0.001} if total else {}


def gather_facts(input_dict: dict[str, list], configured: dict[str, Any], run_id: str) -> CardFacts:
    """The card's facts: the config's part as given, the rest from the run's artifacts."""
    examples = artifact_utils.get_single_instance(input_dict["examples"])
    evaluation_uri = artifact_utils.get_single_uri(input_dict["evaluation"])
    statistics_uri = artifact_utils.get_single_uri(input_dict["statistics"])
    blessing = artifact_utils.get_single_instance(input_dict["model_blessing"])
    labels = list(configured["label_names"])
    multi_label = configured["multi_label"]
    metrics, slices, _ = read_metrics(evaluation_uri, labels, multi_label=multi_label)
    baseline, _, _ = read_metrics(evaluation_uri, labels, "baseline", multi_label)
    blessed = bool(blessing.get_int_custom_property("blessed"))
    record = TrainingRecord.read(artifact_utils.get_single_uri(input_dict["model_run"]))
    recipe = recipe_as_trained(configured["recipe"], record)
    tokenization = {}
    for split in ("train", "test"):
        path = os.path.join(statistics_uri, f"Split-{split}", "FeatureStats.pb")
        if os.path.exists(path) or "://" in path:
            tokenization[split] = tokenization_figures(path)
    return CardFacts(
        **{k: v for k, v in configured.items() if k not in ("recipe",)},
        run_id=run_id,
        split_counts=_custom_json(examples, SPLIT_COUNTS_PROPERTY, {}),
        label_counts=_custom_json(examples, LABEL_COUNTS_PROPERTY, {}),
        dropped_counts=_custom_json(examples, DROPPED_COUNTS_PROPERTY, {}),
        recipe=recipe,
        metrics=metrics,
        baseline_metrics=baseline,
        slices=slices,
        blessed=blessed,
        blessing_reason=blessing_reason(evaluation_uri, blessed),
        tokenization=tokenization,
        scripts=scripts_seen(examples.uri),
    )


def recipe_as_trained(configured: dict[str, Any], record: TrainingRecord | None) -> dict[str, Any]:
    """The card's recipe with the values training used where the config's were not: the Tuner's best trial's
    values, the epochs chosen (the config may say auto), the checkpoint it started from, the epochs run."""
    recipe = dict(configured)
    if record is None:
        return recipe
    recipe["epochs"] = record.epochs
    if record.learning_rate is not None:
        recipe["learning rate"] = record.learning_rate
    for name, value in (record.tuned or {}).items():
        recipe[CARD_NAMES.get(name, name.replace("_", " "))] = value
    if record.tuned:
        recipe["tuned"] = f"the Tuner's best trial chose {', '.join(sorted(record.tuned))}"
    if record.started_from:
        recipe["started from"] = record.started_from
    recipe["epochs run"] = record.describe_epochs()
    return recipe


class Executor(base_executor.BaseExecutor):
    def Do(self, input_dict, output_dict, exec_properties) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        published = artifact_utils.get_single_instance(output_dict["hf_model"])
        blessing = artifact_utils.get_single_instance(input_dict["model_blessing"])
        if not blessing.get_int_custom_property("blessed"):
            published.set_int_custom_property(PUBLISHED_PROPERTY, 0)
            print("[HFPublisher] the model is not blessed: no Hugging Face export, nothing pushed", flush=True)
            return
        source = os.path.join(artifact_utils.get_single_uri(input_dict["model"]), HF_FORMAT_DIR)
        io_utils.copy_dir(source, published.uri)
        run_id = (self._context.pipeline_run_id if self._context else "") or _local_copy(published.uri, untagged_run_id)
        configured = json.loads(exec_properties["card_facts"])
        configured["label_names"] = tuple(configured["label_names"])
        configured["language"] = tuple(configured.get("language", ()))
        configured["text_budget"] = _local_copy(published.uri, lambda folder: _text_budget(folder, configured))
        configured["architecture"] = json.loads(io_utils.read_string_file(os.path.join(published.uri, HF_CONFIG))).get(
            "model_type", ""
        )
        card = build_model_card(gather_facts(input_dict, configured, run_id))
        parse_card(card.content)  # fails here, not at the Hub, on metadata its model-index parser rejects
        io_utils.write_string_file(os.path.join(published.uri, CARD_FILE), card.content)
        published.set_int_custom_property(PUBLISHED_PROPERTY, 1)
        print(f"[HFPublisher] Hugging Face export and model card in {published.uri}", flush=True)
        hub = build_section(HubConfig, json.loads(exec_properties["hub"]), "hub")
        if hub.repo_id:
            metrics = card.data.eval_results or []
            summary = ", ".join(f"{r.metric_type} {r.metric_value}" for r in metrics)
            revision = _push(published.uri, hub, run_id, f"{configured['title']}: test {summary}")
            published.set_string_custom_property(HUB_URL_PROPERTY, revision.repo_url)
            published.set_string_custom_property(HUB_COMMIT_PROPERTY, revision.commit)
            published.set_string_custom_property(HUB_TAG_PROPERTY, revision.tag)
            state = "pushed" if revision.pushed else "already there from an earlier attempt of this run"
            print(f"[HFPublisher] {revision.repo_url} @ {revision.tag} ({revision.commit[:12]}): {state}", flush=True)
            logging.info("Hub revision %s", revision)


def _text_budget(folder: str, configured: dict[str, Any]) -> str:
    """The character budget the export's tokenizer cuts texts to, in words (the tokenizer files are the model's)."""
    windows = configured.get("windows")
    spec = tokenizer_spec(folder)
    budget = character_budget(
        spec, configured["max_seq_length"], configured.get("head_share"), windows and tuple(windows)
    )
    return budget.describe()


def _push(uri: str, hub: HubConfig, run_id: str, message: str) -> HubRevision:
    return _local_copy(uri, lambda folder: push_folder(folder, hub, run_id, message))


def _local_copy(uri: str, use):
    """use(a local path holding the folder at uri): huggingface_hub and hashlib read local files."""
    if "://" not in uri:
        return use(uri)
    with tempfile.TemporaryDirectory(prefix="hf-publish-") as local:
        io_utils.copy_dir(uri, local)
        return use(local)


class HFPublisher(base_component.BaseComponent):
    """Publishes a blessed model in the Hugging Face layout with its card; pushes it to a Hub if configured."""

    SPEC_CLASS = HFPublisherSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)

    def __init__(self, *, model, model_blessing, evaluation, examples, statistics, model_run, card_facts, hub):
        super().__init__(
            spec=HFPublisherSpec(
                model=model,
                model_blessing=model_blessing,
                evaluation=evaluation,
                examples=examples,
                statistics=statistics,
                model_run=model_run,
                card_facts=json.dumps(card_facts),
                hub=json.dumps(hub),
                hf_model=types.Channel(type=HuggingFaceModel),
            )
        )
