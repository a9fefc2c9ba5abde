"""The config's part of a model card: what the HFPublisher cannot read from the run's artifacts."""

from __future__ import annotations

from typing import Any

from components.example_gen.sources import PACKAGED_DATASET_HUB_IDS
from components.publisher.hub_push import hub_model_id
from models.hub.pretrained import PACKAGED_HUB_IDS, PACKAGED_PREFIX
from pipeline.configs import PipelineConfig


def _hub_id(name: str, packaged: dict[str, str]) -> str | None:
    if name.startswith(PACKAGED_PREFIX):
        return packaged.get(name.removeprefix(PACKAGED_PREFIX))
    return hub_model_id(name)


def training_recipe(config: PipelineConfig) -> dict[str, Any]:
    tr = config.training
    recipe = {
        "epochs": tr.epochs,
        "batch size": tr.batch_size,
        "learning rate": tr.learning_rate,
        "warm-up ratio": tr.warmup_ratio,
        "gradient clipping": f"global norm {tr.gradient_clip_norm}" if tr.gradient_clip_norm else "none",
        "weight decay": tr.weight_decay,
        "precision": tr.precision,
        "max_seq_length": config.model.max_seq_length,
        **({"long texts": f"head_tail (head share {share})"} if (share := config.model.kept_head_share) else {}),
        **({"long texts": f"windows (at most {w[1]}, stride {w[0]})"} if (w := config.model.windows) else {}),
        "seed": tr.seed,
        "class weights": tr.class_weights if isinstance(tr.class_weights, str) else dict(tr.class_weights),
    }
    if tr.dropout is not None:
        recipe["dropout"] = tr.dropout
    if tr.freeze_embeddings:
        recipe["input embeddings"] = "frozen"
    if tr.early_stopping.patience:
        recipe["early stopping"] = tr.early_stopping.model_dump(mode="json")
    return recipe


def card_facts(config: PipelineConfig) -> dict[str, Any]:
    """JSON for the HFPublisher's `card_facts` parameter (components/model_card.CardFacts' config fields)."""
    ds, ev, hub = config.dataset, config.evaluation, config.hub
    dataset = ds.name + (f" ({ds.config_name})" if ds.config_name else "")
    return {
        "title": hub.repo_id.rsplit("/", 1)[-1] if hub.repo_id else config.model_name,
        "pipeline_name": config.pipeline_name,
        "label_names": list(ds.label_names),
        "multi_label": ds.multi_label,
        "pair": bool(ds.text_pair_column),
        "max_seq_length": config.model.max_seq_length,
        **({"head_share": share} if (share := config.model.kept_head_share) else {}),
        **({"windows": list(windows)} if (windows := config.model.windows) else {}),
        "base_model": config.model.name,
        "base_model_id": _hub_id(config.model.name, PACKAGED_HUB_IDS),
        "base_model_revision": config.model.revision or "",
        "dataset": dataset,
        "dataset_id": _hub_id(ds.name, PACKAGED_DATASET_HUB_IDS),
        "recipe": training_recipe(config),
        "thresholds": {
            "min accuracy": ev.min_accuracy,
            "min AUC": ev.min_auc,
            "max AUC regression vs the blessed baseline": ev.max_auc_regression,
            "min macro F1": ev.min_macro_f1,
        },
        "license": hub.license,
        "language": list(hub.language),
        "repo_id": hub.repo_id,
    }
