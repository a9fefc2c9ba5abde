"""The Tuner's module code: TFX's Tuner calls `tuner_fn`, whose tuner trains each trial as the Trainer trains.

KerasTuner's model tuners build and fit Keras 3 models and refuse the tf_keras models our encoders are
(keras-tuner#1039). Its BaseTuner leaves `run_trial` to the caller and keeps the rest: the oracle (Bayesian or
random) proposing each trial from the scores so far, the trial records a rerun resumes from, and the chief/worker
protocol TFX's Vertex Tuner runs across a CustomJob's workers. So a trial here is the Trainer's own training
(components/trainer/: same data, recipe, placement, buckets, early stopping) with the trial's values, scored by
its best epoch on the eval split; nothing is exported.
"""

from __future__ import annotations

import json
import time

import keras_tuner
import tensorflow_transform as tft
import tf_keras
from keras_tuner.engine import base_tuner
from tfx import v1 as tfx

from components.trainer import module as trainer
from components.trainer.class_weights import chosen_class_weights, train_label_counts
from components.trainer.config import TrainerSettings
from components.trainer.plan import plan_training, training_placement
from components.trainer.priors import label_priors
from components.trainer.progress import ProgressLogger
from components.trainer.training_record import describe_values
from components.tuner.config import TUNING_KEY, Range, TuningConfig
from models.config_section import build_section
from models.training.config import EARLY_STOPPING_METRICS
from models.training.eval_noise import eval_result


def search_space(tuning: TuningConfig) -> keras_tuner.HyperParameters:
    """The config's search as KerasTuner hyperparameters: a range is Int or Float (log or linear), a list Choice."""
    space = keras_tuner.HyperParameters()
    for key, values in tuning.search.items():
        if isinstance(values, Range):
            kind = space.Int if values.integers else space.Float
            kind(key, values.min, values.max, sampling=values.scale)
        else:
            space.Choice(key, values)
    return space


def oracle(tuning: TuningConfig) -> keras_tuner.Oracle:
    objective = keras_tuner.Objective(tuning.objective, direction=EARLY_STOPPING_METRICS[tuning.objective])
    kind = {
        "bayesian": keras_tuner.oracles.BayesianOptimizationOracle,
        "random": keras_tuner.oracles.RandomSearchOracle,
    }[tuning.algorithm]
    return kind(
        objective=objective, max_trials=tuning.trials, hyperparameters=search_space(tuning), seed=tuning.seed,
        tune_new_entries=False, allow_new_entries=False,
    )  # fmt: skip


def train_trial(fn_args, settings: TrainerSettings, objective: str) -> dict[str, float]:
    """One trial: the Trainer's training with `settings`, stopped early as the Trainer stops; the eval split's
    metrics at the epoch best by `objective`."""
    tf_keras.backend.clear_session()
    training, label_names = settings.training, list(settings.label_names)
    tf_keras.utils.set_random_seed(training.seed)
    # Alone, whatever TF_CONFIG says: on Vertex the cluster is the parallel trials, each training on its own.
    placement, tf_transform_output = training_placement(training), tft.TFTransformOutput(fn_args.transform_graph_path)
    plan = plan_training(fn_args, settings, placement, tf_transform_output)
    train, validation, _ = trainer.training_data(fn_args, plan, tf_transform_output)
    if validation is None:
        raise keras_tuner.errors.FatalError("tuning scores each trial on the eval split, which is empty")
    train_counts = train_label_counts(fn_args.train_files, len(label_names), settings.multi_label)
    weights = chosen_class_weights(training, label_names, train_counts, settings.multi_label)
    model, _ = trainer.build_and_compile(fn_args, plan, weights)
    callbacks = [ProgressLogger(plan.total_steps, plan.global_batch, training.log_every_steps)]
    # The Trainer's rule, plateau at chance included; a trial keeps no state (writes=False): its history scores it.
    stopping, _ = trainer.early_stopping(
        training, fn_args.working_dir, plan.epochs.epochs, has_eval=True, writes=False,
        train_prior=label_priors(fn_args, settings, weights, train_counts).train, eval_examples=plan.eval_count,
    )  # fmt: skip
    callbacks += [stopping] if stopping else []
    history = trainer.fit(model, plan, train, validation, callbacks, weights).history
    scores = history[objective]
    pick = min if EARLY_STOPPING_METRICS[objective] == "min" else max
    best = scores.index(pick(scores))
    return {
        **{name: float(values[best]) for name, values in history.items() if eval_result(name)},
        "epochs_run": float(len(scores)),
        "best_epoch": float(best + 1),
    }


class HFTuner(base_tuner.BaseTuner):
    """KerasTuner's search loop around `train_trial`."""

    def run_trial(self, trial, fn_args, settings: TrainerSettings, objective: str) -> dict[str, float]:
        values = trial.hyperparameters.values
        print(f"[Tuner] trial {trial.trial_id}: {describe_values(values)}", flush=True)
        started = time.monotonic()
        result = train_trial(fn_args, settings.with_training(values), objective)
        print(f"[Tuner] trial {trial.trial_id}: {objective} {result[objective]:.4f} after "
              f"{int(result['epochs_run'])} epoch(s), {time.monotonic() - started:.0f}s", flush=True)  # fmt: skip
        return result


def tuner_fn(fn_args: tfx.components.FnArgs) -> tfx.components.TunerFnResult:
    """TFX's Tuner entry point: the tuner, and what its search passes each trial."""
    custom_config = fn_args.custom_config
    settings = TrainerSettings.from_custom_config(custom_config)
    tuning = build_section(TuningConfig, custom_config[TUNING_KEY], TUNING_KEY)
    tuner = HFTuner(oracle(tuning), directory=fn_args.working_dir, project_name="hftfx")
    search = json.dumps(tuning.model_dump(mode="json")["search"])
    print(f"[Tuner] {tuning.trials} trials ({tuning.algorithm}) over {search}, scored by the eval split's "
          f"{tuning.objective}", flush=True)  # fmt: skip
    return tfx.components.TunerFnResult(
        tuner=tuner, fit_kwargs={"fn_args": fn_args, "settings": settings, "objective": tuning.objective}
    )
