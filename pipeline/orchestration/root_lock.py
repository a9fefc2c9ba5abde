"""One run per pipeline root at a time: the lock a run (or a trigger) holds on its root and ML Metadata file."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path

from models.errors import UserError

LOCK_NAME = ".hftfx-run.lock"


class PipelineRootBusyError(UserError, RuntimeError):
    """Another run holds the pipeline root (and its ML Metadata sqlite file)."""


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
