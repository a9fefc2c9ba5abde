"""model.safetensors read only as far as it is trusted: its header (8 bytes of length, then JSON) first, checked for
what a safetensors file must be, then only the tensors the model reads, one at a time.

Why not safetensors' own load_file: it reads and converts every tensor the file holds, so a 2 GB tensor no weight
uses costs 2 GB (10 GB once cast), and a truncated file fails deep in the Trainer as a raw SafetensorError. The
header says everything needed to refuse a bad file in milliseconds, before the model is built.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from models.errors import UserError

# safetensors allows a 100 MB header; a model's needs a few hundred bytes per tensor (BERT-base: 17 KB)
HEADER_CAP = 8_000_000
DTYPE_BYTES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1,
    "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
}  # fmt: skip
_FIX = "download the model folder again (or save it again with save_pretrained)"


class CheckpointFileError(UserError, ValueError):
    """model.safetensors is not a whole safetensors file; the message names the file, what is wrong and the fix."""


@dataclasses.dataclass(frozen=True)
class TensorEntry:
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    begin: int = 0  # its bytes within the data, after the header
    end: int = 0

    @property
    def floating(self) -> bool:
        return self.dtype.startswith(("F", "BF"))


def read_header(path: Path) -> dict[str, TensorEntry]:
    """Each tensor's dtype, shape and size, from the header alone; CheckpointFileError where the header is too
    large, not JSON, or describes bytes the file does not hold (a truncated download)."""
    size = path.stat().st_size
    with open(path, "rb") as file:
        length_bytes = file.read(8)
        if len(length_bytes) < 8:
            raise CheckpointFileError(f"{path} is {size} bytes, not a safetensors file: {_FIX}")
        length = int.from_bytes(length_bytes, "little")
        if length > HEADER_CAP:
            raise CheckpointFileError(
                f"{path} declares a {length:,}-byte header, over the {HEADER_CAP:,} bytes any model's needs: not a "
                f"model checkpoint (or a corrupted one): {_FIX}"
            )
        if 8 + length > size:
            raise CheckpointFileError(f"{path} is truncated: its header alone needs {8 + length:,} bytes: {_FIX}")
        raw = file.read(length)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointFileError(f"{path}'s header is not JSON ({error}): {_FIX}") from None
    if not isinstance(header, dict):
        raise CheckpointFileError(f"{path}'s header is not a JSON object: {_FIX}")
    header.pop("__metadata__", None)
    entries = {name: _entry(path, name, value, size - 8 - length) for name, value in header.items()}
    _no_overlap(path, entries)
    return entries


def _no_overlap(path: Path, entries: dict[str, TensorEntry]) -> None:
    """No two tensors share bytes (safetensors' own loader refuses it too): one byte read as two weights is a forged
    or corrupted file."""
    spans = sorted((entry.begin, entry.end, name) for name, entry in entries.items() if entry.nbytes)
    for (_, end, first), (begin, _, second) in itertools.pairwise(spans):
        if begin < end:
            raise CheckpointFileError(
                f"{path}'s tensors {first!r} and {second!r} overlap (bytes {begin:,} to {end:,}): {_FIX}"
            )


def _entry(path: Path, name: str, value, data_bytes: int) -> TensorEntry:
    try:
        dtype, shape, (begin, end) = value["dtype"], tuple(value["shape"]), value["data_offsets"]
        valid = dtype in DTYPE_BYTES and all(isinstance(d, int) and d >= 0 for d in shape)
        valid = valid and isinstance(begin, int) and isinstance(end, int) and 0 <= begin <= end
    except (KeyError, TypeError, ValueError):
        valid = False
    if not valid:
        raise CheckpointFileError(f"{path}'s header describes tensor {name!r} as {str(value)[:120]}: {_FIX}")
    nbytes = math.prod(shape) * DTYPE_BYTES[dtype]
    if end - begin != nbytes:
        raise CheckpointFileError(f"{path}'s tensor {name!r} ({dtype} {list(shape)}) spans {end - begin} bytes: {_FIX}")
    if end > data_bytes:
        raise CheckpointFileError(
            f"{path} is truncated: tensor {name!r} ends at byte {end:,} of its data, which holds {data_bytes:,}: {_FIX}"
        )
    return TensorEntry(dtype, shape, nbytes, begin, end)


def check_finite(path: Path, names: Iterable[str]) -> None:
    """Every value of the named tensors a finite number, read one tensor at a time: a NaN or Inf weight trains to NaN
    from the first step, so `--check` names it instead."""
    for name in names:
        tensor = read_tensors(path, [name])[name]
        if tensor.dtype.kind == "f" and not np.isfinite(tensor).all():
            bad = int(np.size(tensor) - np.isfinite(tensor).sum())
            raise CheckpointFileError(f"{path}'s tensor {name!r} holds {bad:,} NaN or infinite values: {_FIX}")


def read_tensors(path: Path, names: Iterable[str]) -> dict[str, np.ndarray]:
    """The named tensors only, floating ones as float32 (bfloat16 and float16 read through TensorFlow's dtypes,
    which numpy lacks); the file's other tensors are never read."""
    from safetensors import SafetensorError, safe_open

    out = {}
    try:
        with safe_open(str(path), framework="tf") as checkpoint:
            for name in names:
                tensor = checkpoint.get_tensor(name)
                out[name] = tensor.numpy().astype(np.float32) if tensor.dtype.is_floating else tensor.numpy()
    except SafetensorError as error:
        raise CheckpointFileError(f"{path} cannot be read: {error}: {_FIX}") from None
    return out
