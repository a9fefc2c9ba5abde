"""Where a fine-tune starts: the pretrained checkpoint, or the blessed model of the same task (a warm start).

A retrain on a new span of the same task begins, warm, where the serving model ended: it already fits the task,
so it needs a fraction of a cold fine-tune's optimizer steps and a smaller learning rate, whose larger steps
would first undo what it knows (the Vertex MLOps continuous-training sample warm-starts the same way). The
blessed model qualifies only when it is the same task (the baseline resolver matches labels and inputs) on the
same encoder: its family and sizes equal the configured checkpoint's, so its tokenizer and shapes are the ones
the Transform feeds.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, Literal

from models.errors import UserError

WarmStart = Literal["auto", "never", "always"]
# What must match for the blessed model's weights to be this run's starting point.
SAME_ENCODER_KEYS = (
    "model_type",
    "classifier_pooling",  # the head's input: a head trained on the mean of the tokens reads no first token
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "vocab_size",
)
WARM_LEARNING_RATE_SHARE = 0.5  # of the cold recipe's: the model is already near a good point for the task
WARM_EPOCH_SHARE = 1 / 3  # of the epochs auto chooses cold, at least one


class WarmStartError(UserError, ValueError):
    """training.warm_start: always, and the blessed model cannot be a starting point for this run."""


@dataclasses.dataclass(frozen=True)
class StartChoice:
    """The checkpoint a fine-tune starts from, and why."""

    warm: bool
    source: str  # the blessed model's export, or the pretrained model's name
    reason: str

    def describe(self) -> str:
        kind = "warm start from the blessed model" if self.warm else "cold start from the pretrained"
        return f"{kind} {self.source} ({self.reason})"


def asks_for_blessed(mode: WarmStart, spanned: bool) -> bool:
    """Whether the run is handed the latest blessed model of its task to start from: always, or auto on data that
    comes in spans (each run a retrain on a new span); the Trainer then checks it is the same encoder."""
    return mode == "always" or (mode == "auto" and spanned)


def encoder_difference(pretrained: Mapping[str, Any], blessed: Mapping[str, Any]) -> str | None:
    """How the blessed model's encoder differs from the configured checkpoint's (config.json), or None."""
    changed = [
        f"{key} {blessed.get(key)} -> {pretrained.get(key)}"
        for key in SAME_ENCODER_KEYS
        if pretrained.get(key) != blessed.get(key)
    ]
    return "; ".join(changed) or None


def choose_start(
    mode: WarmStart,
    pretrained: str,
    pretrained_config: Mapping[str, Any],
    blessed: str | None,
    blessed_config: Mapping[str, Any] | None,
) -> StartChoice:
    """training.warm_start with what this run has: `blessed` (the export of the latest blessed model of this task,
    None when there is none or the pipeline did not ask for it). auto only receives one for span retrains."""
    if mode == "never":
        return StartChoice(False, pretrained, "training.warm_start: never")
    if blessed is None:
        why = "no blessed model of this task yet" if mode == "always" else "the first run, or data without spans"
        return StartChoice(False, pretrained, f"training.warm_start: {mode}; {why}")
    difference = encoder_difference(pretrained_config, blessed_config or {})
    if difference is not None:
        message = (
            f"the blessed model {blessed} has another encoder than model.name {pretrained} ({difference}): its "
            "weights cannot start this fine-tune"
        )
        if mode == "always":
            raise WarmStartError(f"{message}. Set training.warm_start: auto (or never) to start from the checkpoint")
        return StartChoice(False, pretrained, f"training.warm_start: auto; {message}")
    return StartChoice(True, blessed, f"training.warm_start: {mode}; same task and encoder")


def warm_learning_rate(learning_rate: float) -> float:
    return learning_rate * WARM_LEARNING_RATE_SHARE


def warm_epochs(cold_epochs: int) -> int:
    return max(1, math.ceil(cold_epochs * WARM_EPOCH_SHARE))


def describe_warm_recipe(learning_rate: float, cold_epochs: int | None, epochs_auto: bool) -> str:
    """What a warm start changes in the recipe, with the reason (`cold_epochs` None: not known before the run)."""
    if not epochs_auto:
        epochs = "the epochs as set"
    elif cold_epochs is None:
        epochs = "a third of the epochs auto chooses cold"
    else:
        epochs = f"at most {warm_epochs(cold_epochs)} epoch(s), a third of the {cold_epochs} auto chooses cold"
    return (
        f"learning rate {warm_learning_rate(learning_rate):.3g} (half the cold recipe's {learning_rate:.3g}) and "
        f"{epochs}: the blessed model already fits the task, so fewer and smaller steps keep what it learnt"
    )
