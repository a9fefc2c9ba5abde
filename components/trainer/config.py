"""What the Trainer reads: its settings (the model and training sections whole, the label set), and the Tuner's
best trial's values laid over them."""

from __future__ import annotations

import dataclasses
from typing import Any

from components.trainer.training_record import describe_values
from models.config_section import build_section
from models.training.config import ModelConfig, TrainingConfig


@dataclasses.dataclass(frozen=True)
class TrainerSettings:
    """What run_fn receives through the Trainer's custom_config. The label names are the run's label set
    (declared, or found by the preflight), the same list the ExampleGen mapped ids with and the Evaluator sizes
    its metrics by."""

    model: ModelConfig
    training: TrainingConfig
    label_names: tuple[str, ...]
    # Multi-label: a sigmoid per label, binary cross-entropy, and serving answers the labels whose probability
    # reaches their decision threshold (one per label, in id order).
    multi_label: bool = False
    decision_thresholds: tuple[float, ...] = ()

    def to_custom_config(self) -> dict[str, Any]:
        config = {
            "model": self.model.model_dump(mode="json"),
            "training": self.training.model_dump(mode="json"),
            "label_names": list(self.label_names),
        }
        if self.multi_label:
            config.update(multi_label=True, decision_thresholds=list(self.decision_thresholds))
        return config

    def with_training(self, values: dict[str, Any]) -> TrainerSettings:
        """These settings with training keys replaced (a tuning trial's values, or the best trial's)."""
        training = build_section(TrainingConfig, {**self.training.model_dump(mode="json"), **values}, "training")
        return dataclasses.replace(self, training=training)

    @classmethod
    def from_custom_config(cls, custom_config: dict[str, Any], tuned: dict[str, Any] | None = None) -> TrainerSettings:
        """The settings the pipeline compiled, with `tuned` (the Tuner's best trial's values, said) laid over the
        training section before it is validated once."""
        if tuned:
            print(f"[Trainer] the Tuner's best trial: {describe_values(tuned)}", flush=True)
        return cls(
            model=build_section(ModelConfig, custom_config["model"], "model"),
            training=build_section(TrainingConfig, {**custom_config["training"], **(tuned or {})}, "training"),
            label_names=tuple(custom_config["label_names"]),
            multi_label=bool(custom_config.get("multi_label", False)),
            decision_thresholds=tuple(custom_config.get("decision_thresholds", ())),
        )


def tuned_values(hyperparameters: dict[str, Any] | None) -> dict[str, Any]:
    """The Tuner's best trial's values (its `best_hyperparameters`, KerasTuner's HyperParameters config as
    fn_args.hyperparameters holds it); {} without a Tuner."""
    return dict((hyperparameters or {}).get("values", {}))
