"""Files the in-graph tokenizers write from a tokenizer.json (the WordPiece vocab, a SentencePiece model) for ops that
read a path: under the temp folder, named by their content, written once (renamed into place, so a concurrent
writer never leaves half a file)."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


def content_named_file(data: bytes, prefix: str, suffix: str) -> Path:
    """`data` at <temp>/<prefix><its hash><suffix>, written if no such file is there yet."""
    path = Path(tempfile.gettempdir()) / f"{prefix}{hashlib.sha256(data).hexdigest()[:16]}{suffix}"
    if not path.is_file():
        staging = path.with_suffix(f".{os.getpid()}.tmp")
        staging.write_bytes(data)
        staging.replace(path)
    return path


def is_written(path: str | Path, prefix: str) -> bool:
    """Whether `path` is a file content_named_file wrote with `prefix` (not a model folder's own)."""
    path = Path(path)
    return path.parent == Path(tempfile.gettempdir()) and path.name.startswith(prefix)
