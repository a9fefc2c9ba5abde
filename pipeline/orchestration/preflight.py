"""Everything a local run checks before its first component, in the order a user fixes what it finds
(`hftfx run --check` runs exactly these), so no error a run could know before training comes after it. What
the checks find (the label set, the task kind, the span, the model's sizes, a sample of rows) is what
choose.py then chooses every `auto` from.

1. the Hub token a push needs (the push comes after training), before anything is written;
2. the folders the run writes (pipeline root, serving folder, ML Metadata file);
3. the model: architecture and sizes, tokenizer family, the weights file's header against config.json, position
   limit (check_model);
4. the data, through the ExampleGen's own dataset pass over a bounded sample (components/example_gen/
   dataset_pass.py's SAMPLE, so it costs the same whatever the dataset's size): open, schema, rows, label set,
   placement, split checks; then the label settings, the training splits and the Evaluator's metrics for the
   label set found (check_data). Full validation of big data is the ExampleGen's and the ExampleValidator's job;
   then the model's tokenizer as the Trainer's export writes it, read back on the sample as the publisher reads it
   (check_tokenizer_export);
5. the model served under the run's name: one of another task is not replaced unasked;
6. the unlabeled rows the run scores: there, readable, with the text columns the model reads.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path

from components.evaluator.config import threshold_per_label
from components.example_gen import dataset_pass, sources
from components.local_beam import local_beam_runner
from components.publisher.hub_push import check_credentials
from components.tuner.config import Range
from models.encoders.from_folder import ModelFolder, check_weights, read_model_folder
from models.errors import UserError
from models.hub.pretrained import hub_commit, resolve_model_dir
from models.serving.tokenizer_export import ROUND_TRIP_WIDTH, check_round_trip
from models.task import TaskContract, exported_shape, read_contract
from models.tokenizers.tokenizer import tokenizer_spec
from models.training.lengths import AUTO
from pipeline.config.pipeline_config import ConfigError, PipelineConfig, check_label_settings


@dataclasses.dataclass(frozen=True)
class ModelFacts:
    """What the model checks read: the folder's record (from_folder.ModelFolder: its files, limits, sizes), its
    commit, and what it computes with its tokenizer."""

    folder: ModelFolder
    commit: str | None = None  # a hub model's commit, which every component then reads (None: not a hub model)
    architecture: str = ""  # which path it takes and what its encoder computes (from_folder.Architecture.describe)


@dataclasses.dataclass(frozen=True)
class Found:
    """What the checks found: the config with what the data says filled in (the label set, the task kind, the span
    resolved: facts, not choices), the model's facts and the dataset pass over the sample."""

    config: PipelineConfig
    model: ModelFacts
    data: dataset_pass.DatasetPass


def preflight(config: PipelineConfig) -> Found:
    """The checks 1 to 6 above, in that order."""
    check_credentials(config.hub)
    check_paths(config)
    found = check_model_and_data(config)
    check_serving_contract(found.config, found.config.dataset.task_contract())
    found.config.scoring.check_input(pair_model=bool(found.config.dataset.text_pair_column))
    return found


def check_model_and_data(config: PipelineConfig) -> Found:
    """Checks 3 and 4: what the choices are made from (tests and benchmarks take it alone: it writes nothing)."""
    model = check_model(config)
    checked, data = check_data(config)
    check_tokenizer_export(checked, model, data)
    return Found(checked, model, data)


ROUND_TRIP_ROWS = 64  # of the sample: enough texts to meet most of a tokenizer's paths, a second's work


def check_tokenizer_export(config: PipelineConfig, model: ModelFacts, data: dataset_pass.DatasetPass) -> None:
    """The tokenizer files the Trainer's export will write, written and read back on the sample's texts (the export's
    round trip, models/serving/tokenizer_export.py): what the publisher and a warm start read after training."""
    rows = [row for rows in (data.placed.rows.values() if data.placed else ()) for row in rows][:ROUND_TRIP_ROWS]
    texts = [text for row in rows for text in (row.text, row.text_pair) if text is not None]
    width = config.model.max_seq_length
    check_round_trip(model.folder.directory, texts, width if width != AUTO else ROUND_TRIP_WIDTH)


def check_model(config: PipelineConfig, weights: bool = True) -> ModelFacts:
    """The model checks, most fundamental first, so the real reason is named: an architecture our Keras encoders
    build, a tokenizer family the in-graph tokenizer reproduces, the weights (unless `weights`
    is False: compile and submit read only config and tokenizer), max_seq_length within the position limit."""
    directory = resolve_model_dir(config.model.name, config.model.revision, weights=weights)
    commit = hub_commit(config.model.name, directory)  # what the name resolved to, pinned for the components
    # the weights after the tokenizer: the order of fixes
    folder = read_model_folder(directory, weights=False, pooling=config.model.pooling)
    tokenizer = tokenizer_spec(directory)
    architecture = f"{folder.architecture.describe()}; {tokenizer.family} tokenizer, in-graph"
    architecture += f" ({note})" if (note := tokenizer.budget_note()) else ""
    if weights:
        folder = folder.with_weights()
        check_weights(folder, values=True)  # the header against config.json, then the values read
    requested = config.model.max_seq_length
    if requested != AUTO and requested > folder.position_limit:
        raise ConfigError(
            f"model.max_seq_length {requested} is over the model's position limit {folder.position_limit}; use at "
            f"most {folder.position_limit} (or auto)"
        )
    return ModelFacts(folder, commit, architecture)


def check_data(config: PipelineConfig) -> tuple[PipelineConfig, dataset_pass.DatasetPass]:
    """The ExampleGen's own data checks on a bounded sample (no TFRecords), then the settings that depend on the
    label set found and the Evaluator's metrics for it; returns the config with the label set, the task kind and
    the span as found."""
    found = dataset_pass.dataset_pass(config.dataset, dataset_pass.SAMPLE, beam_label_values(config.beam_args))
    names, multi_label = found.label_names, found.read.config.multi_label
    check_label_settings(config, names, multi_label)
    if found.complete:
        check_training_splits(config, found.placed.totals())
    # TFMA, seconds of imports, loads once the model and the data passed: a refusal before costs none
    from components.evaluator import module as evaluation

    thresholds = threshold_per_label(config.evaluation, names) if multi_label else None
    evaluation.check_eval_config(len(names), config.evaluation, thresholds)
    dataset = config.dataset.model_copy(
        update={"label_names": tuple(names), "span": found.read.config.span, "multi_label": multi_label}
    )
    return config.model_copy(update={"dataset": dataset}), found


def beam_label_values(beam_args) -> dataset_pass.DistinctLabels:
    """The label column's distinct values from one Beam pass, for a sample short of the whole dataset."""

    def distinct(read: sources.DatasetRead) -> list:
        import apache_beam as beam

        from components.example_gen import beam_rows

        with tempfile.TemporaryDirectory() as scratch, local_beam_runner():
            return beam_rows.distinct_label_values(beam.Pipeline(argv=list(beam_args)), read, scratch)

    return distinct


def check_training_splits(config: PipelineConfig, sizes: dict[str, int]) -> None:
    """What the Trainer and the Tuner's trials need of the splits, known once the whole dataset is sampled: an
    eval split to stop early or score trials with, and a train split of at least one batch of every batch size
    they may use (windows only add examples)."""
    eval_rows, train_rows = sizes.get("eval", 0), sizes.get("train", 0)
    patience = config.training.early_stopping.patience
    if not eval_rows and patience not in (AUTO, 0):
        raise ConfigError(
            f"training.early_stopping.patience {patience} watches the eval split, which is empty: give the dataset "
            "an eval split (dataset.split_ratios) or set the patience to 0"
        )
    if not eval_rows and config.tuning.enabled:
        raise ConfigError(
            "tuning scores each trial on the eval split, which is empty: give the dataset an eval split "
            "(dataset.split_ratios) or set tuning.trials to 0"
        )
    batch = config.tuning.search.get("batch_size", ()) if config.tuning.enabled else ()
    largest = max([config.training.batch_size, *([batch.max] if isinstance(batch, Range) else batch)])
    replicas = config.training.cpu_replicas  # a global batch spans them
    if train_rows < largest * replicas:
        named = "tuning.search.batch_size" if largest != config.training.batch_size else "training.batch_size"
        raise ConfigError(
            f"the train split has {train_rows} examples, fewer than one batch of {largest * replicas} ({named} "
            f"{largest}{f' x {replicas} CPU replicas' if replicas > 1 else ''}): lower it or add data"
        )


class ServingContractError(UserError, ValueError):
    """The run would push a model its serving name's clients cannot call the same way."""


def served_version(base_directory: str) -> Path | None:
    """The newest numbered TF Serving version under a local model base path (what clients get now)."""
    base = Path(base_directory)
    versions = [p for p in base.iterdir() if p.name.isdigit()] if base.is_dir() else []
    return max(versions, key=lambda p: int(p.name)) if versions else None


def serving_contract_change(config: PipelineConfig, contract: TaskContract) -> str | None:
    """How this run's contract differs from the version served under its serving name; None if it does not
    (or nothing is served there yet, or the serving folder is remote: a gs:// folder is not read here)."""
    if "://" in config.serving_dir:
        return None
    version = served_version(config.push_base_directory)
    if version is None:
        return None
    served = read_contract(str(version))
    if served is not None:
        differences = contract.differences(served)
        shown = served.describe()
    else:  # exported before contracts were recorded: inputs and label count are still in saved_model.pb
        inputs, width = exported_shape(str(version))
        differences = []
        if inputs != tuple(sorted(contract.text_inputs)):
            differences.append(f"inputs {list(inputs)} -> {list(contract.text_inputs)}")
        if width is not None and width != len(contract.label_names):
            differences.append(f"{width} labels -> {len(contract.label_names)}")
        shown = f"inputs {list(inputs)}, {width} labels"
    if not differences:
        return None
    return (
        f"version {version.name} under {config.push_base_directory} serves {shown}; this run: {'; '.join(differences)}"
    )


def check_serving_contract(config: PipelineConfig, contract: TaskContract) -> None:
    """Before any component: a blessed model of another task must not replace the served one unasked."""
    change = serving_contract_change(config, contract)
    if change is None or config.replace_serving_contract:
        return
    raise ServingContractError(
        f"{change}. Pushing it would break the clients of '{config.model_name}'. Serve it under another name "
        "(--set model_name=NAME, or another --serving-dir), or replace the contract on purpose with "
        "--set replace_serving_contract=true"
    )


def ensure_writable_dir(path: str, key: str) -> Path:
    """Creates `path` if needed and proves it is writable; errors name the config key to change."""
    directory = Path(path)
    if directory.exists() and not directory.is_dir():
        raise ConfigError(f"{key} '{path}' is a file, not a folder; point {key} at a folder")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".hftfx-write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise ConfigError(
            f"{key} '{path}' is not writable ({error.strerror}); choose a folder you can write"
        ) from error
    return directory


def check_paths(config: PipelineConfig) -> None:
    ensure_writable_dir(config.pipeline_root, "pipeline_root")
    if "://" not in config.serving_dir:
        ensure_writable_dir(config.push_base_directory, "serving_dir")
    metadata = Path(config.metadata_sqlite)
    if metadata.exists() and not metadata.is_file():
        raise ConfigError(f"metadata_path '{metadata}' is a folder; it must name the ML Metadata sqlite file")
