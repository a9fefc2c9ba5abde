"""The card's facts: the config sections the publisher is given, the values training used (the training record:
tuned, chosen or warm-started), and what the run's artifacts hold (examples, statistics, evaluation, blessing)."""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import typing
import unicodedata
from typing import Any

from tfx.types import artifact_utils

from components.evaluator.config import EvaluationConfig
from components.evaluator.eval_results import blessing_reason, read_metrics
from components.example_gen.config import DatasetConfig
from components.example_gen.sources import PACKAGED_DATASET_HUB_IDS
from components.publisher.config import HubConfig
from components.publisher.hub_push import hub_model_id
from components.publisher.model_card import CardFacts
from components.trainer.training_record import TrainingRecord
from components.transform.tokenization_stats import tokenization_figures
from models.hub.pretrained import PACKAGED_HUB_IDS, PACKAGED_PREFIX
from models.names import DROPPED_COUNTS_PROPERTY, LABEL_COUNTS_PROPERTY, SPLIT_COUNTS_PROPERTY, TEXT_FEATURE
from models.training.config import ModelConfig, TrainingConfig

# The card's names of training settings the Tuner may choose.
CARD_NAMES = {"batch_size": "batch size", "learning_rate": "learning rate", "warmup_ratio": "warm-up ratio"}
SCRIPT_SAMPLE = 2000  # train texts whose letters are counted by Unicode script for the card


@dataclasses.dataclass(frozen=True)
class CardSections:
    """The config the publisher reads, section by section, as the DAG passes it."""

    pipeline_name: str
    model_name: str  # the served name: the card's title without a Hub repo
    dataset: DatasetConfig
    model: ModelConfig
    training: TrainingConfig
    evaluation: EvaluationConfig
    hub: HubConfig


# The config sections the publisher reads (each a JSON parameter), by name: CardSections' section-typed fields.
SECTIONS = {name: kind for name, kind in typing.get_type_hints(CardSections).items() if kind is not str}


def _hub_id(name: str, packaged: dict[str, str]) -> str | None:
    if name.startswith(PACKAGED_PREFIX):
        return packaged.get(name.removeprefix(PACKAGED_PREFIX))
    return hub_model_id(name)


def training_recipe(model: ModelConfig, tr: TrainingConfig) -> dict[str, Any]:
    """The recipe as configured; recipe_as_trained puts what training used over it."""
    recipe = {
        "epochs": tr.epochs,
        "batch size": tr.batch_size,
        "learning rate": tr.learning_rate,
        "warm-up ratio": tr.warmup_ratio,
        "gradient clipping": f"global norm {tr.gradient_clip_norm}" if tr.gradient_clip_norm else "none",
        "weight decay": tr.weight_decay,
        "precision": tr.precision,
        "max_seq_length": model.max_seq_length,
        **({"long texts": f"head_tail (head share {share})"} if (share := model.kept_head_share) else {}),
        **({"long texts": f"windows (at most {w[1]}, stride {w[0]})"} if (w := model.windows) else {}),
        "seed": tr.seed,
        "class weights": tr.class_weights if isinstance(tr.class_weights, str) else dict(tr.class_weights),
    }
    if tr.dropout is not None:
        recipe["dropout"] = tr.dropout
    if tr.label_smoothing:
        recipe["label smoothing"] = tr.label_smoothing
    if tr.freeze_embeddings:
        recipe["input embeddings"] = "frozen"
    if tr.early_stopping.patience:
        recipe["early stopping"] = tr.early_stopping.model_dump(mode="json")
    return recipe


def configured_facts(sections: CardSections) -> dict[str, Any]:
    """CardFacts' fields the config decides."""
    ds, ev, hub, model = sections.dataset, sections.evaluation, sections.hub, sections.model
    dataset = ds.name + (f" ({ds.config_name})" if ds.config_name else "")
    return {
        "title": hub.repo_id.rsplit("/", 1)[-1] if hub.repo_id else sections.model_name,
        "pipeline_name": sections.pipeline_name,
        "label_names": tuple(ds.label_names),
        "multi_label": ds.multi_label,
        "pair": bool(ds.text_pair_column),
        "max_seq_length": model.max_seq_length,
        **({"head_share": share} if (share := model.kept_head_share) else {}),
        **({"windows": tuple(windows)} if (windows := model.windows) else {}),
        "base_model": model.name,
        "base_model_id": _hub_id(model.name, PACKAGED_HUB_IDS),
        "base_model_revision": model.revision or "",
        "dataset": dataset,
        "dataset_id": _hub_id(ds.name, PACKAGED_DATASET_HUB_IDS),
        "recipe": training_recipe(model, sections.training),
        "thresholds": {
            "min accuracy": ev.min_accuracy,
            "min AUC": ev.min_auc,
            "max AUC regression vs the blessed baseline": ev.max_auc_regression,
            "min macro F1": ev.min_macro_f1,
        },
        "license": hub.license,
        "language": tuple(hub.language),
        "repo_id": hub.repo_id,
    }


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
    """The card's facts: the config's part (configured_facts, with what the executor read from the export), the
    rest from the run's artifacts."""
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
    if record.pooling:
        recipe["pooling"] = record.pooling
    recipe["epochs run"] = record.describe_epochs()
    return recipe
