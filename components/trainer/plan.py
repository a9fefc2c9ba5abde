"""What run_fn decides before building the model: where it trains, the precision, the global batch, the split
sizes and epochs, the checkpoint it starts from; the resume folder and the disk it needs."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
from typing import Any

import tf_keras

from components.trainer.config import TrainerSettings
from components.trainer.data import count_records, split_batches, train_lengths, window_count, written_model_inputs
from models.encoders.from_folder import ModelFolder, read_model_folder
from models.errors import UserError
from models.hardware import distribution
from models.hardware.cpu_features import cpu_supports_bf16
from models.hub.pretrained import resolve_model_dir
from models.serving.hf_export import hf_format_dir
from models.training.config import TrainingConfig
from models.training.epochs import EpochChoice, choose_epochs
from models.training.lengths import AUTO, LengthProfile
from models.training.long_and_few import TrainTexts
from models.training.recipe import choose_recipe
from models.training.warm_start import StartChoice, choose_start, warm_epochs, warm_learning_rate


class DiskSpaceError(UserError, OSError):
    """Not enough free disk for checkpoints and the export."""


def resume_dir(fn_args, settings: TrainerSettings) -> str:
    """Where training checkpoints live: the same folder for the same inputs and settings, across the new
    Trainer executions a rerun creates, so a rerun after a crash continues instead of starting over."""
    trainer_root = os.path.dirname(os.path.dirname(fn_args.model_run_dir.rstrip("/")))
    identity = {"train": sorted(fn_args.train_files), "config": settings.to_custom_config()}
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    return os.path.join(trainer_root, ".resume", key)


def check_disk_space(model, directories: list[str], factor: float = 4.0) -> None:
    """Checkpoints (weights and AdamW's two moments), the SavedModel and the Hugging Face export's tf_model.h5
    need about `factor` times the weights; fail before training if the space is not there."""
    needed = int(factor * sum(w.shape.num_elements() * w.dtype.size for w in model.weights))
    for directory in directories:
        if "://" in directory:
            continue  # object stores report no free space
        os.makedirs(directory, exist_ok=True)
        free = shutil.disk_usage(directory).free
        if free < needed:
            raise DiskSpaceError(
                f"only {free / 2**30:.2f} GiB free under {directory}; checkpoints and the export need about "
                f"{needed / 2**30:.2f} GiB. Free disk space or move pipeline_root."
            )


@dataclasses.dataclass(frozen=True)
class TrainingPlan:
    """What run_fn decided before building the model: where and how it trains, on how much data."""

    settings: TrainerSettings
    placement: Any  # models.hardware.distribution.Placement
    precision: str
    global_batch: int
    folder: ModelFolder  # the model folder, read once (config.json, sizes, weights)
    model_inputs: tuple[str, ...]
    train_count: int
    eval_count: int
    epochs: EpochChoice  # training.epochs as set, or chosen from train_count and train_texts
    train_profile: LengthProfile  # token lengths of the first train examples (texts, or windows)
    steps_per_execution: int = 1  # training steps per call from the host (32 on TPUs)
    start: StartChoice | None = None  # where the weights start (None: the pretrained checkpoint, unasked)
    start_folder: ModelFolder | None = None  # a warm start's (the blessed model's HF export); None: `folder`
    rate_reason: str = ""  # why training.learning_rate is what it is where the Trainer set it (the Tuner, a warm start)

    @property
    def train_texts(self) -> TrainTexts:
        """The train examples' median length and count: what the recipe and the epochs for long texts and few
        examples are chosen from (models/training/long_and_few.py), as the preflight chose them from its sample."""
        return TrainTexts.of(self.train_profile, self.train_count)

    @property
    def steps_per_epoch(self) -> int:
        return self.train_count // self.global_batch

    @property
    def eval_steps(self) -> int:
        return self.eval_count // self.global_batch

    @property
    def total_steps(self) -> int:
        return self.steps_per_epoch * self.epochs.epochs

    @property
    def static_validation(self) -> bool:
        """A TPU compiles one program per shape: there validation keeps full batches at max_seq_length."""
        return self.placement.kind == "tpu"


def training_placement(
    training: TrainingConfig, role: distribution.ClusterRole | None = None
) -> distribution.Placement:
    """Where training runs: a cluster of workers (`role`, from TF_CONFIG), a TPU, GPUs or the CPU. Chosen before
    TensorFlow runs any op: MultiWorkerMirroredStrategy sets up its collectives at TensorFlow's start."""
    distribution.configure_cpu_replicas(training.cpu_replicas)  # a no-op where the runner already did it
    return distribution.select_placement(cpu_replicas=training.cpu_replicas, role=role)


def plan_training(
    fn_args, settings: TrainerSettings, placement: distribution.Placement, tf_transform_output
) -> TrainingPlan:
    """Precision, global batch, the model's files, its inputs as Transform wrote them and the split sizes, for the
    placement."""
    training = settings.training
    precision = distribution.resolve_precision(training.precision, placement)
    tf_keras.mixed_precision.set_global_policy(distribution.KERAS_POLICY[precision])
    directory = resolve_model_dir(settings.model.name, settings.model.revision)
    folder = read_model_folder(directory, pooling=settings.model.pooling)
    train_count = count_records(fn_args.train_files, window_count(settings))
    global_batch, model_inputs = training.batch_size * placement.replicas, written_model_inputs(tf_transform_output)
    profile = train_lengths(
        split_batches(
            fn_args, fn_args.train_files, tf_transform_output, settings, global_batch, model_inputs, training=False,
            static_shapes=False,
        )
    )  # fmt: skip
    plan = TrainingPlan(
        settings=settings,
        placement=placement,
        precision=precision,
        global_batch=global_batch,
        folder=folder,
        model_inputs=model_inputs,
        train_count=train_count,
        eval_count=count_records(fn_args.eval_files, window_count(settings)),
        epochs=choose_epochs(training.epochs, train_count, TrainTexts.of(profile, train_count)),
        train_profile=profile,
        steps_per_execution=distribution.resolve_steps_per_execution(training.steps_per_execution, placement),
    )
    if plan.steps_per_epoch == 0:
        raise ValueError(
            f"the train split has {plan.train_count} examples, fewer than one global batch of {plan.global_batch}; "
            "lower training.batch_size or add data"
        )
    examples = "examples" if window_count(settings) is None else "examples (windows of the texts)"
    why = distribution.precision_reason(training.precision, precision, placement, cpu_supports_bf16())
    print(
        f"[Trainer] {placement.describe()}, {precision} ({why}), global batch {plan.global_batch}, "
        f"{plan.steps_per_execution} step(s) per execution; {plan.train_count} train / "
        f"{plan.eval_count} eval {examples}; {plan.epochs.describe()} x {plan.steps_per_epoch} steps; "
        f"labels {list(settings.label_names)}",
        flush=True,
    )
    return plan


def with_start(fn_args, plan: TrainingPlan, tuned_by: dict[str, Any]) -> TrainingPlan:
    """The plan starting from the checkpoint training.warm_start chooses: TFX hands the Trainer the latest blessed
    model of the task as `base_model` when the pipeline asks for one (pipeline/orchestration/dag.py). A warm start
    loads that model's HF export (its head included) at half the learning rate and, under epochs: auto, a third
    of the epochs (models/training/warm_start.py); the Tuner's own values are kept."""
    settings = plan.settings
    blessed, blessed_folder = None, None
    if fn_args.base_model:
        blessed = hf_format_dir(fn_args.base_model)
        blessed_folder = read_model_folder(resolve_model_dir(blessed))  # a bucket's folder copied here once; as it was
    start = choose_start(
        settings.training.warm_start,
        settings.model.name,
        plan.folder.config,
        blessed,
        blessed_folder.config if blessed_folder else None,
    )
    print(f"[Trainer] {start.describe()}", flush=True)
    rate_reason = "from the Tuner's best trial" if "learning_rate" in tuned_by else ""
    if not start.warm:
        return dataclasses.replace(plan, start=start, rate_reason=rate_reason)
    training, epochs = settings.training, plan.epochs
    if "learning_rate" not in tuned_by:  # half of a validated rate: nothing to validate again
        cold = choose_recipe(plan.folder.shape, plan.folder.model_type, training, plan.train_texts)  # auto's, or set
        rate = warm_learning_rate(cold.learning_rate)
        settings = dataclasses.replace(settings, training=training.model_copy(update={"learning_rate": rate}))
        rate_reason = f"halved from the cold recipe's {cold.learning_rate:.3g} for a warm start from the blessed model"
    if training.epochs == AUTO and "epochs" not in tuned_by:
        epochs = EpochChoice(warm_epochs(epochs.epochs), f"a warm start: a third of the cold choice, {epochs.reason}")
    return dataclasses.replace(
        plan, settings=settings, epochs=epochs, start=start, start_folder=blessed_folder, rate_reason=rate_reason
    )
