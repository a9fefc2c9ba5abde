"""Files the in-graph tokenizers write from a tokenizer.json (the WordPiece vocab, a SentencePiece model) for ops that
read a path: in a folder of the temp folder that only this user can write, named by their content, and used again
only while they hold exactly that content.

A shared temp folder lets anyone plant a file under a predictable name: a vocab with two words swapped changes the
in-graph ids ("good" reads as "bad") and would ship in the SavedModel. So the folder is this user's own (created
0700, refused when another user owns it, it is a link, or others may write it), each file is written to a name
no one else can predict (`tempfile.mkstemp`, created exclusively) and renamed into place, and a file already there
is read and compared with what would be written before it is used.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
from pathlib import Path

from models.errors import UserError


class UnsafeTempFolder(UserError, PermissionError):
    """The private folder for tokenizer files exists but is not this user's alone; the message names the fix."""


def private_folder() -> Path:
    """<temp>/hftfx-<uid>: created 0700 if missing; UnsafeTempFolder unless it is a real folder this user owns that
    no one else may write."""
    folder = _folder_path()
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    info = folder.lstat()
    problem = (
        "is not a folder (a link or a file)" if not stat.S_ISDIR(info.st_mode)
        else f"belongs to user {info.st_uid}, not {os.getuid()}" if info.st_uid != os.getuid()
        else f"may be written by others (mode {stat.S_IMODE(info.st_mode):o})" if info.st_mode & 0o022
        else ""
    )  # fmt: skip
    if problem:
        raise UnsafeTempFolder(
            f"{folder}, where tokenizer files built from tokenizer.json are kept, {problem}: another user could "
            f"change the ids a model reads. Remove it (it is rebuilt) or set TMPDIR to a folder of your own"
        )
    return folder


def content_named_file(data: bytes, prefix: str, suffix: str) -> Path:
    """`data` at <private folder>/<prefix><its hash><suffix>: a file there already is used only if it holds `data`
    byte for byte, else written anew."""
    folder = private_folder()
    path = folder / f"{prefix}{hashlib.sha256(data).hexdigest()[:16]}{suffix}"
    if _holds(path, data):
        return path
    descriptor, staging = tempfile.mkstemp(prefix=f".{prefix}", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
        os.replace(staging, path)
    except BaseException:
        Path(staging).unlink(missing_ok=True)
        raise
    return path


def _holds(path: Path, data: bytes) -> bool:
    """Whether `path` is a regular file (not a link) of exactly `data`."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(info.st_mode) or info.st_size != len(data):
        return False
    return path.read_bytes() == data


def is_written(path: str | Path, prefix: str) -> bool:
    """Whether `path` is a file content_named_file wrote with `prefix` (not a model folder's own)."""
    path = Path(path)
    return path.parent == _folder_path() and path.name.startswith(prefix)


def _folder_path() -> Path:
    return Path(tempfile.gettempdir()) / f"hftfx-{os.getuid()}"
