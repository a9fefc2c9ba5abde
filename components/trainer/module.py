"""Trainer's module: fine-tune the Hugging Face model as our Keras classifier on the transformed examples and export it.

Named by path (`components.trainer.module.run_fn`). Training code knows nothing of where it runs: the strategy
(TPU / several GPUs / default) and precision come from the hardware, the global batch is the per-replica
batch times the replicas, and batches have static shapes so the same step compiles under XLA and on TPU.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shutil
import time
from typing import Any

import tensorflow as tf
import tensorflow_text  # noqa: F401
import tensorflow_transform as tft
import tf_keras
from absl import logging
from tfx import v1 as tfx
from tfx_bsl.public import tfxio

from components.trainer.attempts import AttemptLog
from components.trainer.best_epoch import BestEpoch
from components.trainer.class_weights import class_weight_map, train_label_counts
from components.trainer.training_meter import TrainingMeter, record_batch_shapes
from components.trainer.training_record import TrainingRecord, describe_values
from models.config_section import build_section
from models.errors import UserError
from models.hardware import distribution
from models.hardware.flops import EncoderShape
from models.hardware.machine_peak import matmul_peak
from models.hub.pretrained import build_classifier, model_files, read_config, resolve_model_dir, weights_only_copy
from models.names import ATTENTION_MASK, LABEL_FEATURE, TEXT_FEATURES, WINDOW_MASK
from models.serving import signatures, tf_serving
from models.serving.hf_export import hf_format_dir, save_hf_format
from models.task import task_contract, write_contract
from models.tokenizers.tokenizer import tokenizer_spec
from models.training.config import EARLY_STOPPING_METRICS, ModelConfig, TrainingConfig
from models.training.epochs import EpochChoice, StoppingChoice, choose_epochs, choose_patience
from models.training.lengths import AUTO, LENGTH_SAMPLE, LengthProfile, bucket_edges, choose_buckets
from models.training.optimizer import adamw_with_warmup
from models.training.recipe import RecipeChoice, choose_recipe
from models.training.warm_start import StartChoice, choose_start, warm_epochs, warm_learning_rate


@dataclasses.dataclass(frozen=True)
class TrainerSettings:
    """What run_fn receives through the Trainer's custom_config. The label names are the run's label set
    (declared, or found by the probe), the same list the ExampleGen mapped ids with and the Evaluator sizes
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
    def from_custom_config(cls, custom_config: dict[str, Any]) -> TrainerSettings:
        return cls(
            model=build_section(ModelConfig, custom_config["model"], "model"),
            training=build_section(TrainingConfig, custom_config["training"], "training"),
            label_names=tuple(custom_config["label_names"]),
            multi_label=bool(custom_config.get("multi_label", False)),
            decision_thresholds=tuple(custom_config.get("decision_thresholds", ())),
        )


class ProgressLogger(tf_keras.callbacks.Callback):
    """One readable line every few steps: progress, loss, accuracy, examples/s, model FLOP/s against the
    machine's matmul peak, and time left. Validation time is not training time: it is left out of the rates."""

    def __init__(
        self,
        total_steps: int,
        global_batch: int,
        every: int,
        meter: TrainingMeter | None = None,
        attempts: AttemptLog | None = None,
    ):
        super().__init__()
        self.total_steps, self.global_batch, self.every = total_steps, global_batch, max(1, every)
        self.meter, self.attempts = meter, attempts  # attempts: the chief's log of restarts, None elsewhere
        self.step = 0
        self.examples_per_second = 0.0
        self.validation_seconds = 0.0

    def on_train_begin(self, logs=None):
        self.started = time.monotonic()
        # BackupAndRestore has restored the optimizer by now: its step count says where training resumes.
        self.step = self.initial_step = int(self.model.optimizer.iterations.numpy())
        if self.step:
            redone = ""
            if self.attempts is not None:
                entry = self.attempts.resumed(self.step)
                redone = f"; about {entry['redone_steps']} step(s) ({entry['redone_seconds']:.0f}s) to train again"
            print(f"[Trainer] resumed from the checkpoint at step {self.step}/{self.total_steps}{redone}", flush=True)
        elif self.attempts is not None:
            self.attempts.started_anew()

    def on_test_begin(self, logs=None):
        self.validation_started = time.monotonic()

    def on_test_end(self, logs=None):
        self.validation_seconds += time.monotonic() - self.validation_started

    @property
    def training_seconds(self) -> float:
        return time.monotonic() - self.started - self.validation_seconds

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        done_here = self.step - self.initial_step
        if self.meter is not None:
            self.meter.steps, self.meter.seconds = done_here, self.training_seconds
        if self.step % self.every and self.step != self.total_steps:
            return
        elapsed = self.training_seconds
        self.examples_per_second = done_here * self.global_batch / max(elapsed, 1e-9)
        left = (self.total_steps - self.step) * elapsed / max(done_here, 1)
        logs = self.running_metrics()
        utilization = f"| {self.meter.describe(done_here, elapsed)} " if self.meter is not None else ""
        if self.attempts is not None:
            self.attempts.reached(self.step, elapsed / max(done_here, 1))
        print(
            f"[Trainer] step {self.step}/{self.total_steps} ({self.step / self.total_steps:.0%}) "
            f"loss {logs.get('loss', float('nan')):.4f} accuracy {logs.get('accuracy', float('nan')):.3f} "
            f"| {self.examples_per_second:.1f} examples/s {utilization}| {elapsed:.0f}s training, ~{left:.0f}s left",
            flush=True,
        )

    def running_metrics(self) -> dict[str, float]:
        """The epoch's running loss and metrics over every replica. Keras' batch `logs` sum each replica's own
        means under a strategy with several replicas (its "auto" reduction is "sum" off TPUs): 2x the loss on
        two workers. Read here, the metrics' variables are aggregated across replicas (every worker logs at the
        same steps, so the all-reduce this read makes under MultiWorkerMirroredStrategy happens on all)."""
        return {metric.name: float(metric.result()) for metric in self.model.metrics}

    def on_epoch_begin(self, epoch, logs=None):
        self.validation_seconds_before_epoch = self.validation_seconds

    def on_epoch_end(self, epoch, logs=None):
        shown = ", ".join(f"{k} {v:.4f}" for k, v in sorted((logs or {}).items()))
        validation = self.validation_seconds - self.validation_seconds_before_epoch
        timing = f" (validation {validation:.1f}s)" if validation else ""
        print(f"[Trainer] epoch {epoch + 1} done: {shown}{timing}", flush=True)


class CorruptInputError(UserError, RuntimeError):
    """An input TFRecord file cannot be read to its end."""


class DiskSpaceError(UserError, OSError):
    """Not enough free disk for checkpoints and the export."""


def count_records(file_patterns: list[str], windows: int | None = None) -> int:
    """Counts the examples, reading every file to its end: a truncated or corrupted file is named. With `windows`
    (model.long_texts: windows), the windows that hold text: each one is a training example."""
    files = sorted(f for pattern in file_patterns for f in tf.io.gfile.glob(pattern))
    if not files:
        raise CorruptInputError(f"no input files match {file_patterns}")
    mask_spec = {WINDOW_MASK: tf.io.FixedLenFeature([windows or 1], tf.int64)}

    def examples_in(record):
        if windows is None:
            return tf.constant(1, tf.int64)
        return tf.reduce_sum(tf.io.parse_single_example(record, mask_spec)[WINDOW_MASK])

    total = 0
    for path in files:
        dataset = tf.data.TFRecordDataset(path, compression_type="GZIP")
        try:
            total += int(dataset.reduce(tf.constant(0, tf.int64), lambda count, r: count + examples_in(r)).numpy())
        except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as error:
            raise CorruptInputError(
                f"{path} is truncated or corrupted ({error.message.splitlines()[0]}); it was not skipped. "
                "Re-run the component that wrote it (e.g. with --no-cache)."
            ) from error
    return total


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


def without_autotuning(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """The dataset with tf.data's autotuning thread switched off (AUTOTUNE then means the core count).

    That thread sleeps up to ~10 s between rounds and an iterator's destructor waits for it
    (RootDataset::Iterator::~Iterator), so `fit` and each validation returned up to 10 s after their last
    step. The input pipeline has nothing to tune here: a step is hundreds of ms of model work.
    """
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


def make_dataset(fn_args, files, tf_transform_output, batch_size, model_inputs, *, training, seed, static_shapes=True):
    """Batches of (model inputs, label); with static_shapes (XLA / TPU) a last partial batch is dropped."""
    options = tfxio.TensorFlowDatasetOptions(
        batch_size=batch_size,
        label_key=LABEL_FEATURE,
        drop_final_batch=static_shapes,
        shuffle=training,
        shuffle_seed=seed,
        num_epochs=None if training else 1,
    )
    dataset = fn_args.data_accessor.tf_dataset_factory(files, options, tf_transform_output.transformed_metadata.schema)
    return without_autotuning(dataset.map(lambda features, label: ({k: features[k] for k in model_inputs}, label)))


def sharded_by_batch(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """Under several workers, each takes its piece of every global batch (Keras splits the batch, TF's DATA
    auto-sharding hands out the pieces), so the workers step through the batches one machine would: the global
    batch, the length buckets and the schedule stay one machine's. Each worker still reads every record (FILE
    sharding would need as many files as workers and give each its own buckets): parsing a record is cheap
    beside a step of the encoder."""
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)


def bucket_by_length(
    dataset: tf.data.Dataset,
    batch_size: int,
    widths: tuple[int, ...],
    max_seq_length: int,
    *,
    keep_partial_batches: bool = False,
):
    """Groups examples of similar token length and cuts each batch to the smallest width that holds it.

    Padding is masked, so results are unchanged; short reviews stop paying for max_seq_length. Each width
    is one static shape, so XLA / TPU compile once per width. A finite dataset (validation) keeps each
    bucket's last partial batch with keep_partial_batches; without it, they are dropped (static shapes).
    """
    edges = bucket_edges(max_seq_length, widths)
    widths = edges[:-1]
    if not widths:
        return dataset
    all_widths = tf.constant(edges, tf.int32)

    def length(features, label):
        return tf.reduce_sum(tf.cast(features[ATTENTION_MASK], tf.int32))

    def trim(features, label):
        longest = tf.reduce_max(tf.reduce_sum(tf.cast(features[ATTENTION_MASK], tf.int32), axis=1))
        width = tf.gather(all_widths, tf.searchsorted(all_widths, [longest], side="left")[0])
        return {k: v[:, :width] for k, v in features.items()}, label

    return (
        dataset.unbatch()
        .bucket_by_sequence_length(
            length,
            bucket_boundaries=[w + 1 for w in widths],
            bucket_batch_sizes=[batch_size] * (len(widths) + 1),
            drop_remainder=not keep_partial_batches,
            no_padding=True,
        )
        .map(trim, num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )


def validation_data(eval_batches, batch_size, widths, max_seq_length, *, static_shapes: bool):
    """Validation batches. With static_shapes (TPU): full batches at max_seq_length, as make_dataset gives them.
    Otherwise every example once, length-bucketed as training is: on the default split validation sees all
    1,275 examples (full batches only: 1,248) in 7.6 s instead of 8.7 s at width 64."""
    if static_shapes:
        return eval_batches
    return bucket_by_length(eval_batches, batch_size, widths, max_seq_length, keep_partial_batches=True)


def dense_gradients(grads_and_vars):
    """Embedding gradients (IndexedSlices) summed into dense tensors, so Adam updates them in one fused kernel.

    Our AdamW is Keras' legacy Adam, whose sparse path is not lazy: it still decays both
    moment slots of the whole 30k-row table densely, and its scatter makes the variable copy-on-read, so each
    later read copied the table: about 0.08 s of a 0.5 s MiniLM step. Dense, it is the same update.
    """
    return [(tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g, v) for g, v in grads_and_vars]


def weighted_binary_crossentropy(positive_weights: list[float] | None):
    """Multi-label loss: per label binary cross-entropy on logits, positives weighed by `positive_weights`
    (class weights of a multi-label task), averaged over labels."""
    weights = tf.constant(positive_weights or 1.0, tf.float32)

    def loss(labels, logits):
        labels, logits = tf.cast(labels, tf.float32), tf.cast(logits, tf.float32)
        return tf.reduce_mean(tf.nn.weighted_cross_entropy_with_logits(labels, logits, weights), axis=-1)

    return loss


def loss_and_metrics(multi_label: bool, positive_weights: list[float] | None = None):
    """Single label: softmax cross-entropy and top-1 accuracy. Multi-label: weighted binary cross-entropy and
    the share of right (row, label) decisions at probability 0.5 (logit 0), both named `accuracy`."""
    if multi_label:
        return weighted_binary_crossentropy(positive_weights), [
            tf_keras.metrics.BinaryAccuracy(name="accuracy", threshold=0.0)
        ]
    return tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True), [
        tf_keras.metrics.SparseCategoricalAccuracy(name="accuracy")
    ]


def compile_for_training(
    model,
    training: TrainingConfig,
    total_steps: int,
    multi_label: bool = False,
    positive_weights=None,
    steps_per_execution: int = 1,
) -> RecipeChoice:
    """AdamW with linear warm-up and decay (models/training/optimizer.py), clipped at the recipe's global norm,
    cross-entropy on logits. The recipe's `auto` settings are chosen from the model built (a local run's
    preflight has already chosen them the same way from the same config.json)."""
    recipe = choose_recipe(EncoderShape.from_config(model.config), model.config.model_type, training)
    optimizer = adamw_with_warmup(
        recipe.learning_rate,
        total_steps=total_steps,
        warmup_steps=math.ceil(recipe.warmup_ratio * total_steps),
        weight_decay=training.weight_decay,
        global_clipnorm=recipe.clip_norm,
    )
    optimizer.gradient_transformers = [dense_gradients]
    loss, metrics = loss_and_metrics(multi_label, positive_weights)
    # Under mixed_float16 compile wraps the optimizer in a LossScaleOptimizer (dynamic loss scaling).
    model.compile(optimizer=optimizer, loss=loss, metrics=metrics, steps_per_execution=steps_per_execution)
    return recipe


def early_stopping(
    training: TrainingConfig, checkpoints: str, epochs: int, *, has_eval: bool, writes: bool = True
) -> tuple[BestEpoch | None, StoppingChoice]:
    """The early-stopping callback when training.early_stopping.patience is set or chosen (models/training/epochs.py);
    its state lives beside the training checkpoints (not inside: BackupAndRestore deletes those when training ends).
    Only the chief `writes` it; every worker decides alike from the same all-reduced metrics."""
    stopping = training.early_stopping
    choice = choose_patience(stopping, epochs, has_eval)
    print(f"[Trainer] {choice.describe(stopping.metric)}", flush=True)
    if not choice.patience:
        return None, choice
    mode = EARLY_STOPPING_METRICS[stopping.metric]
    best = BestEpoch(
        stopping.metric, mode, choice.patience, stopping.min_delta, checkpoints.rstrip("/") + "-best", writes=writes
    )
    return best, choice


def class_weights(
    training: TrainingConfig, label_names: list[str], train_files: list[str], multi_label: bool = False
) -> dict[int, float] | None:
    """{label id: weight} for training.class_weights; `balanced` counts the train split's labels first. Single
    label: Keras' class_weight. Multi-label: each label's positive weight in the loss."""
    counts = None
    if training.class_weights == "balanced":
        counts = train_label_counts(train_files, len(label_names), multi_label)
    weights = class_weight_map(training.class_weights, label_names, counts, multi_label)
    if weights is not None:
        shown = ", ".join(f"{label_names[i]} {w:.3f}" for i, w in weights.items())
        counted = f" (train counts {dict(zip(label_names, counts.tagged, strict=True))})" if counts else ""
        kind = "positive weights per label" if multi_label else "class weights"
        print(f"[Trainer] {kind} {shown}{counted}", flush=True)
    return weights


def training_record(
    plan: TrainingPlan,
    weights: dict[int, float] | None,
    best: BestEpoch | None,
    stopping: StoppingChoice,
    history,
    tuned_by: dict[str, Any],
    resumes: list[dict] | None = None,
) -> TrainingRecord:
    """What the Trainer decided and measured: epochs (set or chosen, run, exported, why), class weights, the
    Tuner's values it trained with, and the eval split's metrics of the exported epoch (from Keras' `history`)."""
    training, label_names = plan.settings.training, list(plan.settings.label_names)
    setting = training.class_weights if isinstance(training.class_weights, str) else "mapping"
    if plan.settings.multi_label and weights:
        setting += ", positive weight per label"
    ran = {"epochs_run": plan.epochs.epochs, "stopping_reason": stopping.describe(training.early_stopping.metric)}
    if best is not None:
        ran |= {
            "epochs_run": best.last_epoch + 1,
            "monitor": best.monitor,
            "best_value": best.best_value,
            "best_epoch": best.best_epoch + 1,
            "stopped_early": best.stopped_early,
            "patience": stopping.patience,
            "min_delta": training.early_stopping.min_delta,
        }
    exported, exported_eval = ran.get("best_epoch", ran["epochs_run"]) - 1, None
    if exported in history.epoch:  # a resumed run's history holds only the epochs it ran itself
        at = history.epoch.index(exported)
        exported_eval = {k: float(v[at]) for k, v in history.history.items() if k.startswith("val_")} or None
    return TrainingRecord(
        epochs=plan.epochs.epochs,
        epochs_reason=plan.epochs.reason,
        class_weights={label_names[i]: w for i, w in weights.items()} if weights else None,
        class_weight_setting=setting,
        tuned=tuned_by or None,
        started_from=plan.start.source if plan.start else "",
        start_reason=plan.start.reason if plan.start else "",
        warm=bool(plan.start and plan.start.warm),
        learning_rate=training.learning_rate,
        exported_eval=exported_eval,
        workers=plan.placement.role.training_tasks if plan.placement.role else 1,
        resumes=resumes or [],
        **ran,
    )


@dataclasses.dataclass(frozen=True)
class TrainingPlan:
    """What run_fn decided before building the model: where and how it trains, on how much data."""

    settings: TrainerSettings
    placement: Any  # models.hardware.distribution.Placement
    precision: str
    global_batch: int
    files: Any  # models.hub.pretrained.ModelFiles
    model_inputs: tuple[str, ...]
    train_count: int
    eval_count: int
    epochs: EpochChoice  # training.epochs as set, or chosen from train_count
    steps_per_execution: int = 1  # training steps per call from the host (32 on TPUs)
    start: StartChoice | None = None  # where the weights start (None: the pretrained checkpoint, unasked)
    start_files: Any = None  # a warm start's ModelFiles (the blessed model's HF export); None: `files`

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


def plan_training(fn_args, settings: TrainerSettings, placement: distribution.Placement) -> TrainingPlan:
    """Precision, global batch, the model's files and the split sizes, for the placement."""
    training = settings.training
    precision = distribution.resolve_precision(training.precision, placement)
    tf_keras.mixed_precision.set_global_policy(distribution.KERAS_POLICY[precision])
    files = model_files(resolve_model_dir(settings.model.name, settings.model.revision))
    train_count = count_records(fn_args.train_files, window_count(settings))
    plan = TrainingPlan(
        settings=settings,
        placement=placement,
        precision=precision,
        global_batch=training.batch_size * placement.replicas,
        files=files,
        model_inputs=tuple(tokenizer_spec(files.directory).model_input_names),
        train_count=train_count,
        eval_count=count_records(fn_args.eval_files, window_count(settings)),
        epochs=choose_epochs(training.epochs, train_count),
        steps_per_execution=distribution.resolve_steps_per_execution(training.steps_per_execution, placement),
    )
    if plan.steps_per_epoch == 0:
        raise ValueError(
            f"the train split has {plan.train_count} examples, fewer than one global batch of {plan.global_batch}; "
            "lower training.batch_size or add data"
        )
    examples = "examples" if window_count(settings) is None else "examples (windows of the texts)"
    print(
        f"[Trainer] {placement.describe()}, {precision}, global batch {plan.global_batch}, "
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
    blessed, blessed_dir, blessed_config = None, None, None
    if fn_args.base_model:
        blessed = hf_format_dir(fn_args.base_model)
        blessed_dir = resolve_model_dir(blessed)  # a bucket's folder copied here once
        blessed_config = read_config(blessed_dir)
    start = choose_start(
        settings.training.warm_start, settings.model.name, read_config(plan.files.directory), blessed, blessed_config
    )
    print(f"[Trainer] {start.describe()}", flush=True)
    if not start.warm:
        return dataclasses.replace(plan, start=start)
    training, epochs = settings.training, plan.epochs
    values = {} if "learning_rate" in tuned_by else {"learning_rate": warm_learning_rate(training.learning_rate)}
    if training.epochs == AUTO and "epochs" not in tuned_by:
        epochs = EpochChoice(warm_epochs(epochs.epochs), f"a warm start: a third of the cold choice, {epochs.reason}")
    return dataclasses.replace(
        plan,
        settings=settings.with_training(values) if values else settings,
        epochs=epochs,
        start=start,
        start_files=model_files(blessed_dir),
    )


def window_count(settings: TrainerSettings) -> int | None:
    windows = settings.model.windows
    return None if windows is None else windows[1]


def window_examples(
    dataset: tf.data.Dataset, count: int, width: int, batch_size: int, *, shuffle_seed: int | None, static_shapes: bool
):
    """Batches of texts split into `count` windows each (model.long_texts: windows) -> batches of the windows that
    hold text, each an example with its text's label. Training shuffles them (shuffle_seed), so a batch mixes
    windows of many texts rather than the neighbours of one; static_shapes keeps full batches only."""

    def split(features, label):
        keep = tf.reshape(features[WINDOW_MASK], [-1]) > 0
        windows = {
            name: tf.boolean_mask(tf.reshape(value, [-1, width]), keep)
            for name, value in features.items()
            if name != WINDOW_MASK
        }
        return windows, tf.boolean_mask(tf.repeat(label, count, axis=0), keep)

    windows = dataset.map(split).unbatch()
    if shuffle_seed is not None:
        windows = windows.shuffle(8 * batch_size, seed=shuffle_seed)
    return windows.batch(batch_size, drop_remainder=static_shapes)


def chosen_batch_widths(requested, width: int, train_batches: tf.data.Dataset) -> tuple[int, ...]:
    """The config's bucket widths; for `auto` (a compiled spec: a local run's preflight resolves it) chosen here
    from the token lengths of the first LENGTH_SAMPLE train examples, by the preflight's own rule."""
    if requested != AUTO:
        return requested
    counts = train_batches.map(lambda features, label: tf.reduce_sum(features[ATTENTION_MASK], axis=1))
    profile = LengthProfile.of(list(counts.unbatch().take(LENGTH_SAMPLE).as_numpy_iterator()))
    choice = choose_buckets(profile, width, AUTO)
    print(f"[Trainer] {choice.describe()}; from {len(profile.lengths):,} train examples", flush=True)
    return choice.buckets


def training_data(fn_args, plan: TrainingPlan, tf_transform_output):
    """(train batches grouped by token length, validation batches or None)."""
    settings = plan.settings
    max_seq_length, windows = settings.model.max_seq_length, window_count(settings)

    def batches(files, training: bool):
        static_shapes = training or plan.static_validation
        dataset = make_dataset(
            fn_args, files, tf_transform_output, plan.global_batch,
            [*plan.model_inputs, *([WINDOW_MASK] if windows else [])],
            training=training, seed=settings.training.seed, static_shapes=static_shapes,
        )  # fmt: skip
        if windows is None:
            return dataset
        seed = settings.training.seed if training else None
        return window_examples(
            dataset, windows, max_seq_length, plan.global_batch, shuffle_seed=seed, static_shapes=static_shapes
        )

    buckets = chosen_batch_widths(settings.training.batch_widths, max_seq_length, batches(fn_args.train_files, False))

    train = bucket_by_length(batches(fn_args.train_files, True), plan.global_batch, buckets, max_seq_length)
    if not (plan.eval_steps if plan.static_validation else plan.eval_count):
        return train, None
    validation = validation_data(
        batches(fn_args.eval_files, False), plan.global_batch, buckets, max_seq_length,
        static_shapes=plan.static_validation,
    )  # fmt: skip
    if plan.placement.kind == "multi-worker":
        return sharded_by_batch(train), sharded_by_batch(validation)
    return train, validation


def build_and_compile(fn_args, plan: TrainingPlan, weights):
    """The classifier under the placement's strategy, compiled with AdamW and the task's loss."""
    settings, training = plan.settings, plan.settings.training
    with plan.placement.strategy.scope():
        model, report = build_classifier(
            plan.start_files or plan.files,
            list(settings.label_names),
            dropout=training.dropout,
            freeze_embeddings=training.freeze_embeddings,
            multi_label=settings.multi_label,
        )
        dropout = "the checkpoint's" if training.dropout is None else f"{training.dropout} (training.dropout)"
        embeddings = "frozen (training.freeze_embeddings)" if training.freeze_embeddings else "trained"
        print(f"[Trainer] {report.describe()}; dropout {dropout}; input embeddings {embeddings}", flush=True)
        exports = [fn_args.model_run_dir, fn_args.serving_model_dir]  # none in a tuning trial
        check_disk_space(model, [directory for directory in exports if directory])
        positive = [weights[i] for i in range(len(settings.label_names))] if weights and settings.multi_label else None
        recipe = compile_for_training(
            model, training, plan.total_steps, settings.multi_label, positive, plan.steps_per_execution
        )
        print(f"[Trainer] {recipe.describe()}", flush=True)
    return model


def training_callbacks(fn_args, plan: TrainingPlan, meter: TrainingMeter, has_eval: bool):
    """(callbacks in order, the progress logger, the early-stopping tracker or None, the stopping choice)."""
    training, chief = plan.settings.training, plan.placement.is_chief
    checkpoints = resume_dir(fn_args, plan.settings)
    attempts = AttemptLog(checkpoints) if chief else None
    progress = ProgressLogger(plan.total_steps, plan.global_batch, training.log_every_steps, meter, attempts)
    best_epoch, stopping = early_stopping(training, checkpoints, plan.epochs.epochs, has_eval=has_eval, writes=chief)
    callbacks = [
        # First, so the others see the restored state: a rerun after a crash continues from the last
        # checkpoint (weights, optimizer, step), not from step 0. Under several workers every worker restores the
        # chief's checkpoint (the others write theirs to scratch folders Keras removes).
        tf_keras.callbacks.BackupAndRestore(checkpoints, save_freq=training.checkpoint_every_steps),
        progress,
        *([best_epoch] if best_epoch else []),
    ]
    if chief:
        logs = os.path.join(fn_args.model_run_dir, "logs")
        callbacks.append(tf_keras.callbacks.TensorBoard(log_dir=logs, update_freq=training.log_every_steps))
    return callbacks, progress, best_epoch, stopping


def measured_meter(model, plan: TrainingPlan) -> TrainingMeter:
    """Model FLOP/s against the peak of the device that runs the matmuls, in the precision training uses (a
    TPU's is not measured). Where each global batch is split over devices that each have the peak measured (GPUs,
    workers), one device computes its share of it; logical CPUs share the cores the peak was measured on."""
    training, placement = plan.settings.training, plan.placement
    peak = None
    if placement.kind != "tpu":
        peak = matmul_peak(distribution.MATMUL_DTYPE[plan.precision])
        print(f"[Trainer] {peak.describe()} (measured now)", flush=True)
    shape = EncoderShape.from_config(model.config, embeddings_trained=not training.freeze_embeddings)
    share = 1 / placement.replicas if placement.kind in ("multi-gpu", "multi-worker") else 1.0
    return TrainingMeter(shape, peak, share=share)


def fit(model, plan: TrainingPlan, train, validation, callbacks: list, weights: dict[int, float] | None):
    """Keras' fit over the plan's epochs and steps (full validation batches on a TPU); class weights as Keras
    takes them for one label per row (a multi-label model's are inside its loss)."""
    return model.fit(
        train,
        epochs=plan.epochs.epochs,
        steps_per_epoch=plan.steps_per_epoch,
        validation_data=validation,
        validation_steps=plan.eval_steps if plan.static_validation else None,
        callbacks=callbacks,
        class_weight=None if plan.settings.multi_label else weights,
        verbose=0,
    )


def export_models(fn_args, plan: TrainingPlan, model, tf_transform_output) -> None:
    """The SavedModel with its signatures, warm-up requests and task contract; the Hugging Face format beside."""
    settings = plan.settings
    started = time.monotonic()
    serving_model = weights_only_copy(model)
    module = signatures.ServingModule(
        serving_model,
        tf_transform_output,
        list(settings.label_names),
        model_input_names=list(plan.model_inputs),
        text_features=[f for f in TEXT_FEATURES if f in tf_transform_output.raw_feature_spec()],
        decision_thresholds=settings.decision_thresholds if settings.multi_label else None,
        windows=window_count(settings),
    )
    signatures.export(module, fn_args.serving_model_dir)
    tf_serving.write_warmup_requests(fn_args.serving_model_dir, module.text_inputs)
    contract = task_contract(list(settings.label_names), module.text_inputs, settings.multi_label)
    write_contract(fn_args.serving_model_dir, contract)
    hf_dir = hf_format_dir(fn_args.serving_model_dir)
    save_hf_format(serving_model, plan.files.directory, settings.model.max_seq_length, hf_dir)
    print(
        f"[Trainer] exported SavedModel to {fn_args.serving_model_dir} and the Hugging Face format to {hf_dir} "
        f"in {time.monotonic() - started:.1f}s",
        flush=True,
    )


def tuned_values(hyperparameters: dict[str, Any] | None) -> dict[str, Any]:
    """The Tuner's best trial's values (its `best_hyperparameters`, KerasTuner's HyperParameters config as
    fn_args.hyperparameters holds it); {} without a Tuner."""
    return dict((hyperparameters or {}).get("values", {}))


def tuned(settings: TrainerSettings, values: dict[str, Any]) -> TrainerSettings:
    """The settings with the Tuner's best trial's `values`, said; unchanged without a Tuner."""
    if not values:
        return settings
    print(f"[Trainer] the Tuner's best trial: {describe_values(values)}", flush=True)
    return settings.with_training(values)


def run_fn(fn_args: tfx.components.FnArgs) -> None:
    """Trains and exports. Under several workers (TF_CONFIG) every worker runs this in lock-step and the chief
    alone writes the export, the training record and the measurements."""
    tuned_by = tuned_values(fn_args.hyperparameters)
    settings = tuned(TrainerSettings.from_custom_config(fn_args.custom_config), tuned_by)
    training, label_names = settings.training, list(settings.label_names)
    # First: no TensorFlow op may run before a multi-worker strategy exists.
    placement = training_placement(training, distribution.cluster_role())
    tf_keras.utils.set_random_seed(training.seed)
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_graph_path)
    plan = with_start(fn_args, plan_training(fn_args, settings, placement), tuned_by)
    train_data, eval_data = training_data(fn_args, plan, tf_transform_output)
    weights = class_weights(training, label_names, fn_args.train_files, settings.multi_label)
    model = build_and_compile(fn_args, plan, weights)
    meter = measured_meter(model, plan)
    train_data = record_batch_shapes(train_data, meter.records)
    callbacks, progress, best_epoch, stopping = training_callbacks(fn_args, plan, meter, has_eval=eval_data is not None)
    history = fit(model, plan, train_data, eval_data, callbacks, weights)
    logging.info("training throughput: %.1f examples/s", progress.examples_per_second)
    if not placement.is_chief:
        print(f"[Trainer] {placement.role.describe()}: trained; the chief exports", flush=True)
        return
    meter.write(fn_args.model_run_dir)
    resumes = progress.attempts.finish() if progress.attempts else []
    training_record(plan, weights, best_epoch, stopping, history, tuned_by, resumes).write(fn_args.model_run_dir)
    export_models(fn_args, plan, model, tf_transform_output)
