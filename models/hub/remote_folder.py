"""A folder held in an object store (gs://, or any URL TensorFlow's filesystems read), copied to local disk.

Models fine-tuned from a bucket and SavedModels served from one are read by libraries that open local files
(transformers, TF Serving's loader): the folder is copied once with TF's filesystems, which every artifact of
the pipeline already goes through (and which use the run's own credentials on Google Cloud).
"""

from __future__ import annotations

import fnmatch
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from models.errors import UserError


def is_remote(path: str) -> bool:
    """A URL (gs://bucket/folder, file:///...) rather than a local path."""
    return "://" in path


def localize(
    uri: str, patterns: Sequence[str] = ("*",), *, recursive: bool = True, max_bytes: Callable[[str], int] | None = None
) -> Path:
    """The folder at `uri` on local disk (a fresh temporary folder, kept while the process lives): its files
    whose names match one of `patterns`, subfolders included unless not `recursive`; a file over `max_bytes(name)`
    is refused before it is copied. A local path is returned as it is."""
    if not is_remote(uri):
        return Path(uri)
    import tensorflow as tf

    target = Path(tempfile.mkdtemp(prefix="hftfx-model-"))
    for directory, _, files in tf.io.gfile.walk(uri):
        relative = directory[len(uri.rstrip("/")) :].lstrip("/")
        if relative and not recursive:
            continue
        (target / _inside(relative, uri)).mkdir(parents=True, exist_ok=True)
        for name in files:
            if any(fnmatch.fnmatch(name, pattern) for pattern in patterns):
                source = f"{directory.rstrip('/')}/{name}"
                _check_size(source, max_bytes(name) if max_bytes else None)
                local = target / _inside(f"{relative}/{name}" if relative else name, uri)
                tf.io.gfile.copy(source, str(local), overwrite=True)
    return target


def _check_size(source: str, cap: int | None) -> None:
    import tensorflow as tf

    if cap is not None and (size := tf.io.gfile.stat(source).length) > cap:
        raise UserError(f"{source} is {size:,} bytes, over the {cap:,} a file of its kind can need: not copied")


def _inside(relative: str, uri: str) -> str:
    """An object's path below the folder, refused if it could land outside the copy: object names are any
    string, and one holding '..' or starting with '/' would be joined to a path elsewhere on disk."""
    parts = [part for part in relative.split("/") if part]
    if relative.startswith("/") or any(part in (".", "..") for part in parts):
        raise UserError(f"{uri} holds an object named '{relative}', which would be copied outside the folder")
    return "/".join(parts)
