"""The fine-tuning recipe's model-dependent defaults: learning rate, warm-up and gradient clipping.

One rate does not fit every encoder: MiniLM-L6 fine-tunes best here at 1e-4, while base and large BERT-family
models are fine-tuned at 2e-5 to 5e-5 and 1e-5 and diverge or forget at MiniLM's rate. With `auto` (the default
of each setting) the rate and clipping follow the size of the encoder's Transformer layers (its embeddings left
out: a 250k-token vocabulary says nothing of how gently a model must be fine-tuned) and the warm-up its family.
A number in the config still wins.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator

from models.config_section import AUTO, auto_or_number
from models.hardware.flops import EncoderShape
from models.training.long_and_few import PLATEAU_RATE, TrainTexts

# (encoder parameters at most, learning rate, global-norm clipping, (the size, why its rate)) — smallest first.
SIZE_RULES: tuple[tuple[float, float, float | None, tuple[str, str]], ...] = (
    # MiniLM-L6/L12 (11M / 21M), ELECTRA-small (9M): this pipeline's rate, measured over five seeds (make bench-seeds;
    # +0.011 to +0.014 test accuracy over 5e-5); no clipping, as those runs trained.
    (30e6, 1e-4, None, ("a small encoder", "the rate the default run was tuned at")),
    # BERT-base, RoBERTa-base, XLM-R-base, DeBERTa-v3-base, DistilBERT (43M-85M): BERT's fine-tuning grid
    # {5e-5, 3e-5, 2e-5} (Devlin et al. 2019, appendix A.3), RoBERTa's {1e-5, 2e-5, 3e-5} (Liu et al. 2019,
    # table 10); clipping at global norm 1.0 as transformers' Trainer does (TrainingArguments.max_grad_norm).
    (150e6, 3e-5, 1.0, ("a base-size encoder", "BERT's and RoBERTa's fine-tuning grids meet at 3e-5")),
    # BERT-large, RoBERTa-large (302M): RoBERTa-large's 1e-5 (Liu et al. 2019, table 10); large models
    # fine-tuned at base rates often fail to train (Mosbach et al. 2021, "On the stability of fine-tuning BERT").
    (math.inf, 1e-5, 1.0, ("a large encoder", "RoBERTa-large's rate; faster ones often fail to train")),
)
# BERT's recipe warms up over 10% of the steps; a family whose recipe differs says so in its encoder module (RoBERTa's
# 6%: models/encoders/bert_family.py).
DEFAULT_WARMUP = 0.1


def _clip_norm(value: object) -> object:
    """`auto`, none (no clipping) or a positive global norm."""
    if value is None or str(value).lower() in ("none", "null"):
        return None
    return auto_or_number(value, kind=float, low=1e-12, what="none or a positive norm")


_RATE = functools.partial(auto_or_number, kind=float, low=1e-12, high=1.0, what="a rate between 0 and 1")
_SHARE = functools.partial(auto_or_number, kind=float, low=0.0, high=1.0, what="a share of the steps in [0, 1)")
LearningRate = Annotated[float | Literal["auto"], BeforeValidator(_RATE)]
WarmupRatio = Annotated[float | Literal["auto"], BeforeValidator(_SHARE)]
ClipNorm = Annotated[float | Literal["auto"] | None, BeforeValidator(_clip_norm)]


def encoder_parameters(shape: EncoderShape) -> int:
    """Weights of the Transformer layers (attention's four projections, the feed-forward matrices: two, three where
    the family gates them, biases and layer norms), without embeddings or head."""
    h, i = shape.hidden, shape.intermediate
    return shape.layers * (4 * h * h + 4 * h + shape.feed_forward_matrices * h * i + i + h + 4 * h)


@dataclasses.dataclass(frozen=True)
class RecipeChoice:
    learning_rate: float
    warmup_ratio: float
    clip_norm: float | None
    reason: str
    rate_chosen: bool = False  # the rate is auto's (the size row's), not the config's

    def describe(self) -> str:
        clipping = f"gradients clipped at global norm {self.clip_norm:g}" if self.clip_norm else "no clipping"
        return (
            f"learning rate {self.learning_rate:g}, warm-up {self.warmup_ratio:.0%} of the steps, {clipping} "
            f"({self.reason})"
        )


def choose_recipe(
    shape: EncoderShape | None,
    model_type: str,
    training: Any,
    texts: TrainTexts | None = None,
    rate_reason: str = "",
) -> RecipeChoice:
    """`training`'s learning_rate, warmup_ratio and gradient_clip_norm, each `auto` one chosen from the model;
    a model whose size is unknown gets the base-size row. `texts`: the train split's, where known; long texts and
    few examples lower an auto rate to the plateau's (models/training/long_and_few.py). `rate_reason`: why
    training.learning_rate holds the number it does where the Trainer, not the user, put it there (a warm start's
    half, the Tuner's trial), so the recipe line does not call it the config's."""
    parameters = encoder_parameters(shape) if shape is not None else None
    row = SIZE_RULES[1] if parameters is None else next(rule for rule in SIZE_RULES if parameters <= rule[0])
    _, rate, clip, (size_class, rate_why) = row
    if texts is not None and texts.plateau_prone and rate > PLATEAU_RATE:
        rate_why = (
            f"{rate_why}, lowered to {PLATEAU_RATE:g} for {texts.describe()}: on such pages {rate:g} never left the "
            f"plateau and {PLATEAU_RATE:g} did (make bench-long)"
        )
        rate = PLATEAU_RATE
    size = f"{parameters / 1e6:.0f}M parameters in its layers" if parameters is not None else "a size not declared"
    model = f"a {model_type or 'transformers'} encoder with {size}"
    from models.encoders.classifier import warmup_ratio  # here: the config layer imports this module, not TensorFlow

    family_warmup = warmup_ratio(model_type)
    warmup = DEFAULT_WARMUP if family_warmup is None else family_warmup
    rate_chosen = training.learning_rate == AUTO
    why = f"{size_class}: {rate_why}" if rate_chosen else size_class  # the row's why is its rate's
    return RecipeChoice(
        learning_rate=rate if rate_chosen else float(training.learning_rate),
        warmup_ratio=warmup if training.warmup_ratio == AUTO else float(training.warmup_ratio),
        clip_norm=clip if training.gradient_clip_norm == AUTO else training.gradient_clip_norm,
        reason=_reason(training, f"{model}: {why}", rate_reason),
        rate_chosen=rate_chosen,
    )


def _reason(training: Any, chosen_for: str, rate_reason: str) -> str:
    """Which settings were chosen for the model (`chosen_for`: which model, and why), why the Trainer's rate is what
    it is where it set it (`rate_reason`), and which the config gives."""
    settings = {
        "learning rate": training.learning_rate, "warm-up": training.warmup_ratio,
        "clipping": training.gradient_clip_norm,
    }  # fmt: skip
    explained = bool(rate_reason) and training.learning_rate != AUTO
    chose = [name for name, value in settings.items() if value == AUTO]
    given = [name for name, value in settings.items() if value != AUTO and not (explained and name == "learning rate")]
    parts = [f"{', '.join(chose)} chosen for {chosen_for}"] if chose else []
    if explained:
        parts.append(f"learning rate {rate_reason}")
    if given:
        # "as given", not "set": a Trainer cannot tell a user's value from one its run's preflight or compile fixed
        parts.append(f"{'the rest ' if parts else ''}as the config gives them")
    return "; ".join(parts)
