"""Trainer's module: fine-tune the Hugging Face model as our Keras classifier on the transformed examples and export it.

Named by path (`components.trainer.module.run_fn`). Training code knows nothing of where it runs: the strategy
(TPU / several GPUs / default) and precision come from the hardware, the global batch is the per-replica
batch times the replicas, and batches have static shapes so the same step compiles under XLA and on TPU.
run_fn reads as its steps; beside it: the settings it reads (config.py), the plan made before the model is built
(plan.py), the input pipeline (data.py), the progress lines (progress.py)."""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import time
from typing import Any

import tensorflow as tf
import tensorflow_text  # noqa: F401
import tensorflow_transform as tft
import tf_keras
from absl import logging
from tfx import v1 as tfx

from components.trainer.attempts import AttemptLog
from components.trainer.best_epoch import BestEpoch
from components.trainer.class_weights import chosen_class_weights, train_label_counts
from components.trainer.config import TrainerSettings, tuned_values
from components.trainer.data import (
    bucket_by_length,
    chosen_batch_widths,
    packed_batches,
    sharded_by_batch,
    split_batches,
    validation_data,
    window_count,
)
from components.trainer.plan import (
    TrainingPlan,
    check_disk_space,
    plan_training,
    resume_dir,
    training_placement,
    with_start,
)
from components.trainer.priors import Priors, label_priors
from components.trainer.progress import ProgressLogger
from components.trainer.training_meter import TrainingMeter, record_batch_shapes
from components.trainer.training_record import TrainingRecord
from models.encoders.from_folder import build_classifier, weights_only_copy
from models.hardware import distribution
from models.hardware.machine_peak import matmul_peak
from models.names import TEXT_FEATURES
from models.serving import signatures, tf_serving
from models.serving.hf_export import hf_format_dir, save_hf_format
from models.task import task_contract, write_contract
from models.training.config import EARLY_STOPPING_METRICS, TrainingConfig
from models.training.epochs import StoppingChoice, choose_patience
from models.training.eval_noise import eval_result, squared_loss_metric
from models.training.exported_epoch import more_accurate_epoch
from models.training.lengths import BucketChoice, LengthProfile
from models.training.long_and_few import TrainTexts
from models.training.optimizer import adamw_with_warmup
from models.training.packing import PackingChoice, choose_packing, why_not_packed
from models.training.recipe import RecipeChoice, choose_recipe


def dense_gradients(grads_and_vars):
    """Embedding gradients (IndexedSlices) summed into dense tensors, so Adam updates them in one fused kernel.

    Our AdamW is Keras' legacy Adam, whose sparse path is not lazy: it still decays both
    moment slots of the whole 30k-row table densely, and its scatter makes the variable copy-on-read, so each
    later read copied the table: about 0.08 s of a 0.5 s MiniLM step. Dense, it is the same update.
    """
    return [(tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g, v) for g, v in grads_and_vars]


def weighted_binary_crossentropy(positive_weights: list[float] | None, label_smoothing: float = 0.0):
    """Multi-label loss: per label binary cross-entropy on logits, positives weighed by `positive_weights`
    (class weights of a multi-label task), averaged over labels; `label_smoothing` pulls each 0/1 target toward
    0.5 by that share (Keras' BinaryCrossentropy's rule)."""
    weights = tf.constant(positive_weights or 1.0, tf.float32)

    def loss(labels, logits):
        labels, logits = tf.cast(labels, tf.float32), tf.cast(logits, tf.float32)
        labels = labels * (1.0 - label_smoothing) + 0.5 * label_smoothing
        return tf.reduce_mean(tf.nn.weighted_cross_entropy_with_logits(labels, logits, weights), axis=-1)

    return loss


def smoothed_sparse_crossentropy(label_smoothing: float):
    """Softmax cross-entropy against the label's one-hot target with `label_smoothing` of it spread evenly over all
    labels: (1 - s) x the label's loss + s x the mean over labels of theirs, transformers' LabelSmoother."""

    def loss(labels, logits):
        logits = tf.cast(logits, tf.float32)
        targets = tf.one_hot(tf.reshape(tf.cast(labels, tf.int32), [-1]), tf.shape(logits)[-1])
        return tf_keras.losses.categorical_crossentropy(
            targets, logits, from_logits=True, label_smoothing=label_smoothing
        )

    return loss


def loss_and_metrics(multi_label: bool, positive_weights: list[float] | None = None, label_smoothing: float = 0.0):
    """Single label: softmax cross-entropy and top-1 accuracy. Multi-label: weighted binary cross-entropy and
    the share of right (row, label) decisions at probability 0.5 (logit 0), both named `accuracy`. Both also
    average the per-example loss squared (models/training/eval_noise.py); `label_smoothing` (training's) softens
    the targets of both."""
    if multi_label:
        loss = weighted_binary_crossentropy(positive_weights, label_smoothing)
        return loss, [tf_keras.metrics.BinaryAccuracy(name="accuracy", threshold=0.0), squared_loss_metric(loss)]
    accuracy = tf_keras.metrics.SparseCategoricalAccuracy(name="accuracy")
    if label_smoothing:
        loss = smoothed_sparse_crossentropy(label_smoothing)
        return loss, [accuracy, squared_loss_metric(loss)]
    per_example = functools.partial(tf_keras.losses.sparse_categorical_crossentropy, from_logits=True)
    return tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True), [
        accuracy,
        squared_loss_metric(per_example),  # with val_loss, the eval split's noise (best_epoch.py)
    ]


def compile_for_training(
    model,
    training: TrainingConfig,
    total_steps: int,
    multi_label: bool = False,
    positive_weights=None,
    steps_per_execution: int = 1,
    texts: TrainTexts | None = None,
    rate_reason: str = "",
) -> RecipeChoice:
    """AdamW with linear warm-up and decay (models/training/optimizer.py), clipped at the recipe's global norm,
    cross-entropy on logits. The recipe's `auto` settings are chosen from the model built and the train split's
    `texts` (a local run's preflight has already chosen them the same way from config.json and its sample);
    `rate_reason`: why the rate is what it is where the Trainer set it (recipe.choose_recipe)."""
    recipe = choose_recipe(model.encoder_shape(), model.config.model_type, training, texts, rate_reason)
    optimizer = adamw_with_warmup(
        recipe.learning_rate,
        total_steps=total_steps,
        warmup_steps=math.ceil(recipe.warmup_ratio * total_steps),
        weight_decay=training.weight_decay,
        global_clipnorm=recipe.clip_norm,
    )
    optimizer.gradient_transformers = [dense_gradients]
    loss, metrics = loss_and_metrics(multi_label, positive_weights, training.label_smoothing)
    # Under mixed_float16 compile wraps the optimizer in a LossScaleOptimizer (dynamic loss scaling).
    model.compile(optimizer=optimizer, loss=loss, metrics=metrics, steps_per_execution=steps_per_execution)
    return recipe


def early_stopping(
    training: TrainingConfig,
    checkpoints: str,
    epochs: int,
    *,
    has_eval: bool,
    writes: bool = True,
    train_prior: float | None = None,
    eval_examples: int = 0,
) -> tuple[BestEpoch | None, StoppingChoice]:
    """The early-stopping callback when training.early_stopping.patience is set or chosen (models/training/epochs.py);
    its state lives beside the training checkpoints (not inside: BackupAndRestore deletes those when training ends).
    Only the chief `writes` it; every worker decides alike from the same all-reduced metrics. Epochs whose training
    loss is still at `train_prior`, or whose eval loss is within the noise of `eval_examples` of the best, do not
    count against patience (best_epoch.py)."""
    stopping = training.early_stopping
    choice = choose_patience(stopping, epochs, has_eval)
    print(f"[Trainer] {choice.describe(stopping.metric)}", flush=True)
    if not choice.patience:
        return None, choice
    mode = EARLY_STOPPING_METRICS[stopping.metric]
    state_dir = checkpoints.rstrip("/") + "-best"
    best = BestEpoch(
        stopping.metric,
        mode,
        choice.patience,
        stopping.min_delta,
        state_dir,
        writes=writes,
        train_prior=train_prior,
        eval_examples=eval_examples,
    )
    return best, choice


def training_record(
    plan: TrainingPlan,
    weights: dict[int, float] | None,
    best: BestEpoch | None,
    stopping: StoppingChoice,
    history,
    tuned_by: dict[str, Any],
    recipe: RecipeChoice,
    resumes: list[dict] | None = None,
) -> TrainingRecord:
    """What the Trainer decided and measured: epochs (set or chosen, run, exported, why), the recipe it compiled with,
    class weights, the Tuner's values, and the eval split's metrics of the exported epoch (from Keras' `history`)."""
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
            **{"held": best.held, "within_noise": best.within_noise},
            "patience": stopping.patience,
            "min_delta": training.early_stopping.min_delta,
        }
    exported, exported_eval = ran.get("best_epoch", ran["epochs_run"]) - 1, None
    if exported in history.epoch:  # a resumed run's history holds only the epochs it ran itself
        at = history.epoch.index(exported)
        exported_eval = {k: float(v[at]) for k, v in history.history.items() if eval_result(k)} or None
    return TrainingRecord(
        epochs=plan.epochs.epochs,
        epochs_reason=plan.epochs.reason,
        class_weights={label_names[i]: w for i, w in weights.items()} if weights else None,
        class_weight_setting=setting,
        tuned=tuned_by or None,
        started_from=plan.start.source if plan.start else "",
        start_reason=plan.start.reason if plan.start else "",
        warm=bool(plan.start and plan.start.warm),
        learning_rate=recipe.learning_rate,
        recipe=recipe.describe(),
        pooling=plan.folder.pooling.describe(),
        exported_eval=exported_eval,
        more_accurate=more_accurate_than_exported(history, ran.get("monitor", ""), exported, plan.eval_count),
        workers=plan.placement.role.training_tasks if plan.placement.role else 1,
        resumes=resumes or [],
        **ran,
    )


def more_accurate_than_exported(history, monitor: str, exported: int, eval_examples: int) -> str:
    """An epoch more accurate on the eval split than the one val_loss exported (models/training/exported_epoch.py),
    from Keras' `history`; '' where val_accuracy was watched (its best is the exported one) or nothing was."""
    if monitor != "val_loss":
        return ""
    by_epoch = {k: dict(zip(history.epoch, v, strict=False)) for k, v in history.history.items()}
    return more_accurate_epoch(by_epoch.get("val_accuracy", {}), exported, eval_examples, by_epoch.get("val_loss"))


def training_data(fn_args, plan: TrainingPlan, tf_transform_output):
    """(train batches packed or grouped by token length, validation batches or None, the packing choice)."""
    settings = plan.settings
    max_seq_length = settings.model.max_seq_length

    def batches(files, training: bool):
        return split_batches(
            fn_args, files, tf_transform_output, settings, plan.global_batch, plan.model_inputs, training=training,
            static_shapes=training or plan.static_validation,
        )  # fmt: skip

    profile = plan.train_profile
    chosen = chosen_batch_widths(settings.training.batch_widths, max_seq_length, profile)
    packing, buckets = chosen_packing(plan, profile, chosen), chosen.buckets
    if packing.packed:
        train = packed_batches(batches(fn_args.train_files, True), max_seq_length)
    else:
        train = bucket_by_length(batches(fn_args.train_files, True), plan.global_batch, buckets, max_seq_length)
    if not (plan.eval_steps if plan.static_validation else plan.eval_count):
        return train, None, packing
    validation = validation_data(
        batches(fn_args.eval_files, False), plan.global_batch, buckets, max_seq_length,
        static_shapes=plan.static_validation,
    )  # fmt: skip
    if plan.placement.kind == "multi-worker":
        return sharded_by_batch(train), sharded_by_batch(validation), packing
    return train, validation, packing


def chosen_packing(plan: TrainingPlan, profile: LengthProfile, buckets: BucketChoice) -> PackingChoice:
    """training.packing for this placement and these texts (models/training/packing.py), said in the log; `true`
    where the placement cannot pack (a compiled spec's Trainer on a TPU) is refused before training."""
    settings, width = plan.settings, plan.settings.model.max_seq_length
    placement = plan.placement
    cannot = why_not_packed(
        replicas=placement.replicas, windows=window_count(settings) is not None, width=width,
        fixed_shapes=placement.kind == "tpu",
    )  # fmt: skip
    choice = choose_packing(
        settings.training.packing, profile.lengths, plan.global_batch, width, buckets.padded_share, cannot=cannot
    )
    print(f"[Trainer] {choice.describe()}", flush=True)
    return choice


def build_and_compile(fn_args, plan: TrainingPlan, weights) -> tuple[Any, RecipeChoice]:
    """The classifier under the placement's strategy, compiled with AdamW and the task's loss, and the recipe it
    was compiled with."""
    settings, training = plan.settings, plan.settings.training
    with plan.placement.strategy.scope():
        model, report = build_classifier(
            plan.start_folder or plan.folder,
            list(settings.label_names),
            dropout=training.dropout,
            freeze_embeddings=training.freeze_embeddings,
            multi_label=settings.multi_label,
        )
        dropout = "the checkpoint's" if training.dropout is None else f"{training.dropout} (training.dropout)"
        embeddings = "frozen (training.freeze_embeddings)" if training.freeze_embeddings else "trained"
        pooling = plan.folder.pooling.describe()  # the run's choice: a warm start's model pools alike (warm_start.py)
        print(f"[Trainer] {report.describe()}; {pooling}; dropout {dropout}; input embeddings {embeddings}", flush=True)
        # batches are cut to widths up to it (data.py); packed, a replica's batch of texts fills at most as many rows
        model.bound_width(settings.model.max_seq_length, most_rows=training.batch_size)
        recompute_blocks_where_needed(model, settings)
        exports = [fn_args.model_run_dir, fn_args.serving_model_dir]  # none in a tuning trial
        check_disk_space(model, [directory for directory in exports if directory])
        positive = [weights[i] for i in range(len(settings.label_names))] if weights and settings.multi_label else None
        recipe = compile_for_training(
            model, training, plan.total_steps, settings.multi_label, positive, plan.steps_per_execution,
            plan.train_texts, plan.rate_reason,
        )  # fmt: skip
        print(f"[Trainer] {recipe.describe()}", flush=True)
    return model, recipe


def recompute_blocks_where_needed(model, settings) -> None:
    """Blocks recomputed in the backward pass (layers.run_block) where a step keeping them would not fit this
    machine and the recomputation is exact (models/encoders/step_memory.py: recompute_blocks_pays); said when chosen."""
    from models.encoders.classifier import block_dropout, can_recompute_blocks
    from models.encoders.step_memory import GIB, machine_memory, recompute_blocks_pays, step_memory, texts_of

    training = settings.training
    shape, batch, width = model.encoder_shape(), training.batch_size, settings.model.max_seq_length
    can = can_recompute_blocks(block_dropout(model.hf_config), training.dropout)
    if not recompute_blocks_pays(shape, batch, width, machine_memory(), can):
        return
    model.recompute_blocks()
    kept, recomputed = step_memory(shape, batch, width), step_memory(shape, batch, width, recompute_blocks=True)
    print(
        f"[Trainer] blocks recomputed in the backward pass: a step of {texts_of(batch)} at width {width} holds "
        f"{recomputed.describe()}, ~{kept.total / GIB:.1f} GiB with every block's activations kept",
        flush=True,
    )


def training_callbacks(fn_args, plan: TrainingPlan, meter: TrainingMeter, has_eval: bool, priors: Priors):
    """(callbacks in order, the progress logger, the early-stopping tracker or None, the stopping choice)."""
    training, chief = plan.settings.training, plan.placement.is_chief
    checkpoints = resume_dir(fn_args, plan.settings)
    attempts = AttemptLog(checkpoints) if chief else None
    progress = ProgressLogger(plan.total_steps, plan.global_batch, training.log_every_steps, meter, attempts)
    best_epoch, stopping = early_stopping(
        training,
        checkpoints,
        plan.epochs.epochs,
        has_eval=has_eval,
        writes=chief,
        train_prior=priors.train,
        eval_examples=plan.eval_count,
    )
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


def measured_meter(model, plan: TrainingPlan, packing: PackingChoice) -> TrainingMeter:
    """Model FLOP/s against the peak of the device that runs the matmuls, in the precision training uses (a
    TPU's is not measured). Where each global batch is split over devices that each have the peak measured (GPUs,
    workers), one device computes its share of it; logical CPUs share the cores the peak was measured on. Packed
    batches: the padding they would have carried one text a row, for the summary."""
    training, placement = plan.settings.training, plan.placement
    peak = None
    if placement.kind != "tpu":
        peak = matmul_peak(distribution.MATMUL_DTYPE[plan.precision])
        print(f"[Trainer] {peak.describe()} (measured now)", flush=True)
    shape = model.encoder_shape(embeddings_trained=not training.freeze_embeddings)
    share = 1 / placement.replicas if placement.kind in ("multi-gpu", "multi-worker") else 1.0
    unpacked = packing.padding_before if packing.packed else None
    return TrainingMeter(shape, peak, share=share, padding_one_per_row=unpacked)


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
    save_hf_format(serving_model, plan.folder.directory, settings.model.max_seq_length, hf_dir)
    print(
        f"[Trainer] exported SavedModel to {fn_args.serving_model_dir} and the Hugging Face format to {hf_dir} "
        f"in {time.monotonic() - started:.1f}s",
        flush=True,
    )


def run_fn(fn_args: tfx.components.FnArgs) -> None:
    """Trains and exports. Under several workers (TF_CONFIG) every worker runs this in lock-step and the chief
    alone writes the export, the training record and the measurements."""
    tuned_by = tuned_values(fn_args.hyperparameters)
    settings = TrainerSettings.from_custom_config(fn_args.custom_config, tuned_by)
    training, label_names = settings.training, list(settings.label_names)
    # First: no TensorFlow op may run before a multi-worker strategy exists.
    placement = training_placement(training, distribution.cluster_role())
    tf_keras.utils.set_random_seed(training.seed)
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_graph_path)
    plan = with_start(fn_args, plan_training(fn_args, settings, placement, tf_transform_output), tuned_by)
    train_data, eval_data, packing = training_data(fn_args, plan, tf_transform_output)
    train_counts = train_label_counts(fn_args.train_files, len(label_names), settings.multi_label)
    weights = chosen_class_weights(training, label_names, train_counts, settings.multi_label)
    priors = label_priors(fn_args, settings, weights, train_counts)
    model, recipe = build_and_compile(fn_args, plan, weights)
    meter = measured_meter(model, plan, packing)
    train_data = record_batch_shapes(train_data, meter.records)
    has_eval = eval_data is not None
    callbacks, progress, best_epoch, stopping = training_callbacks(fn_args, plan, meter, has_eval, priors)
    history = fit(model, plan, train_data, eval_data, callbacks, weights)
    chance = priors.verdict(history, recipe.learning_rate)
    print(f"[Trainer] {chance}", flush=True)
    logging.info("training throughput: %.1f examples/s", progress.examples_per_second)
    if not placement.is_chief:
        print(f"[Trainer] {placement.role.describe()}: trained; the chief exports", flush=True)
        return
    meter.write(fn_args.model_run_dir)
    resumes = progress.attempts.finish() if progress.attempts else []
    record = training_record(plan, weights, best_epoch, stopping, history, tuned_by, recipe, resumes)
    dataclasses.replace(record, chance=chance).write(fn_args.model_run_dir)
    export_models(fn_args, plan, model, tf_transform_output)
