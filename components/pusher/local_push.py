"""A Pusher whose TF Serving versions appear whole or not at all.

TFX's filesystem Pusher copies straight into `<base>/<version>/`, writing saved_model.pb last; a crash
midway leaves a numbered folder with part of a model in it. Here the copy goes to a hidden staging folder
(TF Serving ignores names that are not numbers) and is renamed into place, which is atomic on a local
filesystem. Pushes from several runs (other pipeline roots included) take turns under a lock in the serving
directory, each in its own staging folder; only staging folders of pushes that provably died (nobody holds the
lock beside them) are cleared.
A gs:// serving directory gets the same guarantee another way (bucket_push.py: claimed versions, the graph
written last). Unblessed models are never pushed: that check stays TFX's own.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
import uuid

from absl import logging
from tfx.utils import io_utils

STAGING_PREFIX = ".staging-"
PUSH_LOCK = ".push.lock"  # in the serving directory: one push at a time, whatever pipeline root it comes from
STAGING_LOCK_SUFFIX = ".alive"  # beside each staging folder: held while its push lives


def next_version(base_directory: str, now: float | None = None) -> str:
    """A Unix-seconds version that is newer than every version already there."""
    existing = [int(n) for n in os.listdir(base_directory) if n.isdigit()] if os.path.isdir(base_directory) else []
    return str(max(int(now if now is not None else time.time()), max(existing, default=0) + 1))


def staging_name() -> str:
    """This push's own staging folder: a random name, so two pushes never share one even within a second."""
    return f"{STAGING_PREFIX}{uuid.uuid4().hex}"


def _lock_of(staging: str) -> str:
    """The file whose lock says a staging folder's push is alive: held (flock) for as long as the push runs,
    released by the kernel when its process dies, on this host or any container sharing the filesystem. A
    hostname and pid told neither a container with its own pid namespace nor another one with the same name."""
    return staging + STAGING_LOCK_SUFFIX


@contextlib.contextmanager
def staging_held(staging: str):
    """Holds `staging`'s liveness lock while the push copies into it; the lock file goes with the push."""
    handle = open(_lock_of(staging), "a")  # noqa: SIM115 (held across the yield, closed below)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(_lock_of(staging))
        handle.close()


def dead_staging(staging: str) -> bool:
    """A staging folder provably left by a push that died: nobody holds its lock (or, in the former
    one-name-per-second layout that no live push uses, it has no lock). A free lock is taken only to test it;
    no push can start under the same name meanwhile, since names are random."""
    rest = os.path.basename(staging).removeprefix(STAGING_PREFIX)
    if not os.path.exists(_lock_of(staging)):
        return rest.isdigit()  # a lock-less folder of the current layout is still being set up: kept
    with open(_lock_of(staging), "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


def clear_dead_staging(base_directory: str) -> None:
    for name in os.listdir(base_directory):
        path = os.path.join(base_directory, name)
        if not name.startswith(STAGING_PREFIX) or name.endswith(STAGING_LOCK_SUFFIX):
            continue
        if dead_staging(path):
            logging.warning("removing a partial push left by an interrupted run: %s", name)
            shutil.rmtree(path, ignore_errors=True)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(_lock_of(path))


@contextlib.contextmanager
def push_lock(base_directory: str):
    """An exclusive lock on the serving directory (fcntl, held by this process until the push is in place): two
    runs pushing the same model name from different pipeline roots take turns choosing versions."""
    with open(os.path.join(base_directory, PUSH_LOCK), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def push_atomically(model_path: str, base_directory: str) -> tuple[str, str]:
    """Copies the model into base_directory/<version> through this push's own staging folder and renames it into
    place under the serving directory's lock; returns (path, version). A version is complete or absent."""
    os.makedirs(base_directory, exist_ok=True)
    staging = os.path.join(base_directory, staging_name())
    with staging_held(staging):
        try:
            io_utils.copy_dir(model_path, staging)  # outside the push lock: the slow part, in a folder of its own
            with push_lock(base_directory):
                clear_dead_staging(base_directory)
                version = next_version(base_directory)
                destination = os.path.join(base_directory, version)
                os.rename(staging, destination)  # a rename onto an existing version fails: it never mixes two
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return destination, version
