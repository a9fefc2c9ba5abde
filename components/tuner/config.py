"""The `tuning` config section: a search over training settings before the Trainer (TFX's Tuner component).

Apart from components/tuner/module.py, which imports TensorFlow and KerasTuner: the config is read before either loads.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator

from models.config_section import ConfigSection
from models.training.config import EARLY_STOPPING_METRICS, TrainingConfig

TUNING_KEY = "tuning"  # the section inside the Tuner's custom_config, beside the Trainer's settings
# Not searched: what changes what the model is or how a run is kept, rather than how well it learns.
UNSEARCHABLE = frozenset(
    {"seed", "log_every_steps", "checkpoint_every_steps", "cpu_replicas", "early_stopping", "warm_start"}
)


class Range(BaseModel):
    """A number drawn between min and max, on a log scale (rates) or a linear one; whole numbers when both bounds
    are written as integers (`{min: 16, max: 64}`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    min: int | float
    max: int | float
    scale: Literal["log", "linear"] = "log"

    @property
    def integers(self) -> bool:
        return isinstance(self.min, int) and isinstance(self.max, int)

    @model_validator(mode="after")
    def _ordered(self) -> Range:
        if not self.min < self.max:
            raise ValueError(f"min {self.min:g} should be below max {self.max:g}")
        if self.scale == "log" and self.min <= 0:
            raise ValueError("a log scale needs min > 0")
        return self


def _space(value: Any) -> Any:
    """{min, max, scale} -> Range (its own problem named), a list as it is; anything else refused."""
    if isinstance(value, dict):
        try:
            return Range.model_validate(value)
        except ValidationError as error:
            raise ValueError("; ".join(e["msg"].removeprefix("Value error, ") for e in error.errors())) from None
    if isinstance(value, Range | list | tuple):
        return list(value) if isinstance(value, tuple) else value
    raise ValueError("should be {min, max, scale} or a list of choices")


SearchSpace = Annotated[Range | list[Any], BeforeValidator(_space)]


def default_search() -> dict[str, Any]:
    """Learning rate around the small-encoder and base-size rates of models/training/recipe.py (1e-5 to 2e-4, log),
    batch size and the epochs' maximum (early stopping ends each trial sooner when the eval loss stops falling)."""
    return {"learning_rate": Range(min=1e-5, max=2e-4), "batch_size": [16, 32], "epochs": [1, 2, 3]}


class TuningConfig(ConfigSection):
    """A hyperparameter search before the Trainer: each trial fine-tunes with one draw of `search` (early stopping
    on, as in training) and is scored on the eval split; the Trainer then trains with the best trial's values."""

    trials: int = Field(0, ge=0, description="trials in the search; 0: no Tuner (the default)")
    search: dict[str, SearchSpace] = Field(
        default_factory=default_search,
        description="training key -> {min, max, scale: log|linear} or a list of choices; any key of the training "
        "section but seed, logging, checkpoints, cpu_replicas and early_stopping",
    )
    algorithm: Literal["bayesian", "random"] = Field(
        "bayesian",
        description="KerasTuner's oracle: bayesian (a Gaussian process proposes each trial from the scores so far, "
        "after a few random ones) or random",
    )
    objective: Literal[tuple(EARLY_STOPPING_METRICS)] = Field(
        "val_loss", description="the eval split's metric a trial is scored by, at its best epoch"
    )
    parallel_trials: int = Field(
        1, ge=1, description="trials at once: Vertex runs them as one CustomJob's workers; a local run runs one"
    )
    seed: int = Field(42, description="seeds the oracle's draws")

    @field_validator("search")
    @classmethod
    def _training_keys_with_valid_values(cls, search: dict[str, Any]) -> dict[str, Any]:
        for key, space in search.items():
            if key not in TrainingConfig.model_fields or key in UNSEARCHABLE:
                raise ValueError(f"{key!r} is not a training key a search can vary")
            if isinstance(space, list) and not space:
                raise ValueError(f"{key}: an empty list of choices")
            for value in [space.min, space.max] if isinstance(space, Range) else space:
                try:
                    TrainingConfig.model_validate({key: value})  # each value as the training section takes it
                except ValueError:
                    raise ValueError(f"{key}: {value!r} is not a value training.{key} takes") from None
        return search

    @model_validator(mode="after")
    def _no_more_at_once_than_in_all(self) -> TuningConfig:
        if self.trials and self.parallel_trials > self.trials:
            raise ValueError(f"parallel_trials {self.parallel_trials} is more than the {self.trials} trials")
        return self

    @property
    def enabled(self) -> bool:
        return self.trials > 0

    def describe(self) -> str:
        searched = ", ".join(
            f"{key} {space.min:g}-{space.max:g} ({space.scale})" if isinstance(space, Range) else f"{key} in {space}"
            for key, space in self.search.items()
        )
        return (
            f"{self.trials} trials ({self.algorithm}) over {searched}, scored by the eval split's {self.objective}; "
            "the Trainer takes the best trial's values over the recipe above"
        )
