"""The `model` and `training` config sections: which pretrained model, and how the Trainer fine-tunes it."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from models.config_section import ConfigSection, auto_or_number, flag
from models.encoders.pooling import POOLING_CHOICES
from models.training.epochs import AUTO_PATIENCE, MAX_AUTO_EPOCHS, MIN_EXAMPLES_SEEN
from models.training.lengths import AUTO, BucketWidths, SeqLength, WindowCount
from models.training.long_and_few import FEW_EXAMPLES, LONG_TEXT_TOKENS, PLATEAU_EPOCHS, PLATEAU_RATE
from models.training.packing import Packing
from models.training.recipe import ClipNorm, LearningRate, WarmupRatio
from models.training.warm_start import WarmStart

Epochs = Annotated[
    int | Literal["auto"],
    BeforeValidator(functools.partial(auto_or_number, low=1, what="a number of epochs (at least 1)")),
]
Patience = Annotated[
    int | Literal["auto"],
    BeforeValidator(functools.partial(auto_or_number, low=0, what="a number of epochs (0: off)")),
]
StepsPerExecution = Annotated[
    int | Literal["auto"],
    BeforeValidator(functools.partial(auto_or_number, low=1, what="a number of steps (at least 1)")),
]
CLASS_WEIGHT_MODES = ("none", "balanced")
LONG_TEXT_POLICIES = ("truncate", "head_tail", "windows")
EARLY_STOPPING_METRICS = {"val_loss": "min", "val_accuracy": "max"}  # Keras' names of the eval split's metrics
PLATEAU_RATE_TEXT = f"{PLATEAU_RATE:.0e}".replace("e-0", "e-")  # 3e-5, as the other rates here are written


class ModelConfig(ConfigSection):
    """The pretrained Hugging Face model the classifier starts from."""

    name: str = Field(
        "packaged:all-MiniLM-L6-v2",
        description="HF model: hub id, local directory (save_pretrained layout), or packaged:all-MiniLM-L6-v2",
        json_schema_extra=flag("--model"),
    )
    revision: str | None = Field(None, description="hub revision (branch, tag or commit); null: the default branch")
    pooling: Literal[POOLING_CHOICES] = Field(
        "auto",
        description="which tokens the classification head reads: first (the first token, as the family's "
        "transformers class does) or mean (the masked mean of the tokens: BERT's family, ModernBERT, UltraBERT, "
        "EuroBERT; exported in the Sentence Transformers layout where no transformers class computes it). auto: "
        "the pooling the checkpoint's 1_Pooling/config.json declares (mean for the packaged MiniLM, what its "
        "embeddings were trained on), else its family's own head",
        json_schema_extra=flag("--pooling"),
    )
    max_seq_length: SeqLength = Field(
        AUTO,
        description="tokens per example, special tokens included; longer texts are truncated. auto: the smallest "
        "multiple of 16 holding 99% of the training texts whole (measured on the preflight's sample with the "
        "model's tokenizer), at most the model's position limit",
        json_schema_extra=flag("--max-seq-length"),
    )
    long_texts: Literal[LONG_TEXT_POLICIES] = Field(
        "truncate",
        description="what a text longer than max_seq_length keeps: truncate: its start (as HF tokenizers "
        "truncate); head_tail: its start and its end (head_share of the tokens from the start, the rest from the "
        "end); windows: all of it, in overlapping windows of max_seq_length (window_stride, max_windows), trained "
        "one by one with the text's label and answered as the mean of their probabilities. Inside the exported "
        "model as in training. Single texts only: pairs are cut longest first",
        json_schema_extra=flag("--long-texts"),
    )
    window_stride: float = Field(
        0.5,
        gt=0,
        le=1,
        description="windows: the step between consecutive windows' starts, as a share of a window's text tokens "
        "(0.5: every token in two windows, so none is only seen at a window's edge; 1: no overlap)",
    )
    max_windows: WindowCount = Field(
        AUTO,
        description="windows: windows per text at most (tokens past them are cut). auto: as many as hold 99% "
        "of the training texts whole, at most 16",
    )
    head_share: float = Field(
        0.25,
        gt=0,
        lt=1,
        description="head_tail: the share of the kept tokens taken from the text's start (0.25: BERT's 128 + 382 "
        "of 510, the split Sun et al. 2019 found best on long reviews)",
    )

    @property
    def kept_head_share(self) -> float | None:
        """What the tokenizer keeps of a long text's start under head_tail; None: it truncates (keeps the start)."""
        return self.head_share if self.long_texts == "head_tail" else None

    @property
    def windows(self) -> tuple[float, int] | None:
        """(window_stride, max_windows) under long_texts: windows, max_windows resolved from auto by the
        preflight; None: one window per text."""
        if self.long_texts != "windows":
            return None
        if self.max_windows == AUTO:
            raise ValueError("model.max_windows is still auto: the preflight chooses it from the training texts")
        return self.window_stride, int(self.max_windows)


class EarlyStoppingConfig(ConfigSection):
    """Stops training once the eval split's `metric` has not improved by more than `min_delta` for `patience`
    epochs, not counting epochs whose training loss is still at the label frequencies' (a plateau before the model
    finds the signal) nor, under min_delta 0, those within the eval split's noise of the best; the exported model is
    then the best epoch's, not the last one's."""

    patience: Patience = Field(
        AUTO,
        description=f"epochs without improvement before stopping; 0: off (all epochs run). auto: {AUTO_PATIENCE} "
        "when there are 2 or more epochs and an eval split, else off",
    )
    metric: Literal[tuple(EARLY_STOPPING_METRICS)] = Field(
        "val_loss", description="the eval split's metric watched: val_loss (lower is better) or val_accuracy"
    )
    min_delta: float = Field(
        0.0,
        ge=0,
        description="the smallest change that counts as an improvement; at 0, a val_loss worse than the best by "
        "less than the eval split's noise (one standard error) does not count against patience either",
    )


class TrainingConfig(ConfigSection):
    """How the Trainer fine-tunes the model (AdamW, linear warm-up then decay)."""

    RENAMED = {"length_buckets": "training.batch_widths"}  # noqa: RUF012  (evaluation's length slices share the old name)

    epochs: Epochs = Field(
        AUTO,
        description="passes over the train split at most (early stopping may end training sooner). auto: enough "
        f"to train on {MIN_EXAMPLES_SEEN:,} examples, at most {MAX_AUTO_EPOCHS} (1 on a split that large; "
        f"models/training/epochs.py says why); {PLATEAU_EPOCHS} where the train texts are long and few (the loss may "
        "sit at the prior's for epochs first)",
        json_schema_extra=flag("--epochs"),
    )
    batch_size: int = Field(
        32,
        ge=1,
        description="examples per step and replica; the global batch is this times the replica count",
        json_schema_extra=flag("--batch-size"),
    )
    learning_rate: LearningRate = Field(
        AUTO,
        description="peak learning rate. auto: from the encoder's size (1e-4 up to 30M parameters in its layers, "
        "MiniLM's; 3e-5 for base-size; 1e-5 for large: models/training/recipe.py cites the sources), at most "
        f"{PLATEAU_RATE_TEXT} where the train texts are long (median {LONG_TEXT_TOKENS} tokens or more) and few (under "
        f"{FEW_EXAMPLES:,}): models/training/long_and_few.py. The Trainer chooses it from its own train split, which "
        "it counts whole; a local run's preflight says beforehand what it will choose",
        json_schema_extra=flag("--learning-rate"),
    )
    warmup_ratio: WarmupRatio = Field(
        AUTO,
        description="share of the steps spent warming the rate up from 0. auto: 0.06 for RoBERTa-family models "
        "(RoBERTa's recipe), else 0.1",
    )
    gradient_clip_norm: ClipNorm = Field(
        AUTO,
        description="clip the gradients to this global norm; none: no clipping. auto: 1.0 for encoders over 30M "
        "parameters (transformers' Trainer's default), none for small ones (as the default run was tuned)",
    )
    weight_decay: float = Field(0.01, ge=0, description="AdamW's decoupled weight decay")
    label_smoothing: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="share of each target spread evenly over the labels (transformers' label_smoothing_factor; "
        "each label of a multi-label task is pulled toward 0.5 by it, as Keras' binary cross entropy does); 0: "
        "off. It bounds how confident the model can grow, so val_loss, which early stopping watches, rises less "
        "on the few texts a confident model gets wrong",
    )
    precision: Literal["auto", "bf16", "fp16", "fp32"] = Field(
        "auto",
        description="auto: bf16 on TPUs and GPUs that compute it natively, fp16 with loss scaling on older GPUs "
        "(T4, V100), fp32 on CPUs (bf16 there is opt-in: faster on AMX / AVX512-BF16 CPUs, at metrics that "
        "differ from fp32's)",
        json_schema_extra=flag("--precision"),
    )
    steps_per_execution: StepsPerExecution = Field(
        AUTO,
        description="training steps per call from the host (Keras' steps_per_execution). auto: 32 on TPUs (a "
        "round trip to the TPU host per step idles the chips), 1 elsewhere",
    )
    seed: int = Field(42, description="seeds weights of the new head, shuffling and dropout")
    warm_start: WarmStart = Field(
        "auto",
        description="where a retrain starts: auto: from the latest blessed model of the same task and encoder when "
        "the data comes in spans (a span retrain), else the pretrained checkpoint; always: from that model whenever "
        "there is one (another encoder is refused); never: the pretrained checkpoint. A warm start halves the "
        "learning rate and, under epochs: auto, runs a third of the epochs",
    )
    log_every_steps: int = Field(25, ge=1, description="steps between progress lines")
    checkpoint_every_steps: int = Field(
        100, ge=1, description="steps between checkpoints: how much work a crash can cost (reruns resume)"
    )
    cpu_replicas: int = Field(
        1,
        ge=1,
        description="more than 1 splits the CPU into that many devices under MirroredStrategy: rehearses the "
        "multi-replica path (global batch, all-reduce) on a CPU host; no speed-up is to be expected",
    )
    batch_widths: BucketWidths = Field(
        AUTO,
        description="token widths a batch is cut to when all its examples fit (padding is masked: only speed "
        "changes). auto: up to 3 multiples of 16 below max_seq_length that pad the fewest of the training texts' "
        "tokens (the preflight's sample; a cloud run's Trainer measures its train split); empty: every batch is "
        "max_seq_length wide",
    )
    # auto by default: over ten seeds the default run packed reached the unpacked accuracy (0.8211 against 0.8217 on
    # the same batches, 0.8226 at the batch widths: BENCHMARKS.md); with dropout 0 both train to the same model.
    packing: Packing = Field(
        AUTO,
        description="lay a batch's texts end to end in rows of max_seq_length (each text still attends, is "
        "positioned and classified on its own: the same numbers without the padding; the default run: 6% padding "
        "against 22% at its batch widths, 1.16x the examples/s). auto: where it removes at least 5% of the trained "
        "tokens and the run can (one replica, no windows, widths up to 512); the summary says the padding before "
        "and after",
    )
    # 0 made the default run's steps ~10% faster on a CPU and was as accurate over five seeds (issue #14, git log).
    dropout: Annotated[float, Field(ge=0, lt=1)] | None = Field(
        None, description="every dropout layer's rate; null keeps the checkpoint's (0.1 in MiniLM-L6)"
    )
    freeze_embeddings: bool = Field(
        False,
        description="keep the input embeddings as pretrained: half of MiniLM-L6's weights leave AdamW's update "
        "and the first layer's input gradients are not computed",
    )
    class_weights: str | dict[str, float] = Field(
        "none",
        description="loss weight per class: none; balanced (n_train / (K x n_class), from the train split's "
        "counts); or {label name: weight} (labels left out weigh 1)",
    )
    early_stopping: EarlyStoppingConfig = Field(
        default_factory=EarlyStoppingConfig, description="stop when the eval split stops improving"
    )

    @field_validator("class_weights", mode="before")
    @classmethod
    def _mode_or_weights(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            if any(not isinstance(w, int | float) or w <= 0 for w in value.values()):
                raise ValueError("weights should be positive numbers")
            return value
        if value not in CLASS_WEIGHT_MODES:
            raise ValueError(f"should be {' or '.join(CLASS_WEIGHT_MODES)} or a mapping {{label: weight}}")
        return value

    @model_validator(mode="after")
    def _early_stopping_has_epochs_to_choose_from(self) -> TrainingConfig:
        patience = self.early_stopping.patience
        if patience not in (AUTO, 0) and self.epochs != AUTO and self.epochs < 2:
            raise ValueError(
                f"training.early_stopping.patience {patience} needs training.epochs >= 2 (it is {self.epochs}): "
                "early stopping chooses among epochs"
            )
        return self
