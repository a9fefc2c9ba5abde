"""Everything a local run checks before its first component (`preflight`), in the order a user fixes what it
finds, and the machine side of a run: writable folders, one run per pipeline root at a time."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path

from components.publisher.hub_push import check_credentials
from models.errors import UserError
from models.task import TaskContract, exported_shape, read_contract
from pipeline.config.pipeline_config import ConfigError, PipelineConfig
from pipeline.orchestration import probe
from pipeline.orchestration.dag import task_of

LOCK_NAME = ".hftfx-run.lock"


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


class PipelineRootBusyError(UserError, RuntimeError):
    """Another run holds the pipeline root (and its ML Metadata sqlite file)."""


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


@contextlib.contextmanager
def pipeline_root_lock(pipeline_root: str):
    """Holds an exclusive lock on the pipeline root for the run; the kernel drops it if the process dies,
    so a killed run never blocks the next one."""
    path = Path(pipeline_root) / LOCK_NAME
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise PipelineRootBusyError(
                f"another run (pid {holder}) is using pipeline root '{pipeline_root}' and its ML Metadata; "
                "wait for it to finish, or give this run its own --pipeline-root"
            ) from error
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def preflight(config: PipelineConfig) -> probe.ProbeResult:
    """Every check before the first component, in the order a user fixes what they find (`hftfx run --check`
    runs exactly these): so no error a run could know before training comes after it.

    1. the Hub token a push needs (the push comes after training), before anything is written;
    2. the folders the run writes (pipeline root, serving folder, ML Metadata file);
    3. the model: architecture, tokenizer family, weights, position limit (probe.probe_model);
    4. the data, through the ExampleGen's own dataset pass over a bounded sample: open, schema, rows, label set,
       placement, split checks (components/example_gen/dataset_pass.py); then the label settings, the training
       splits and the Evaluator's metrics for the label set found;
    5. the model served under the run's name: one of another task is not replaced unasked;
    6. the unlabeled rows the run scores: there, readable, with the text columns the model reads.
    """
    check_credentials(config.hub)
    check_paths(config)
    probed = probe.probe(config)
    check_serving_contract(probed.config, task_of(probed.config))
    probed.config.scoring.check_input(pair_model=bool(probed.config.dataset.text_pair_column))
    return probed
