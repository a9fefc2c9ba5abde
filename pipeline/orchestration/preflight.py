"""Checks on the machine side of a local run: writable folders, one run per pipeline root at a time."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path

from pipeline.configs import ConfigError, PipelineConfig
from pipeline.errors import UserError

LOCK_NAME = ".hftfx-run.lock"


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
