"""What an input path is: a data file (its format and compression), a glob of them, or a save_to_disk folder of
one Dataset or of a DatasetDict's splits.

Training (the ExampleGen, drift, the doctor's estimate) and scoring (`hftfx predict --input`, the BatchScorer)
take the same paths, so both decide here: one table of formats, one of compressions, one test for each kind
of folder, and one way to list a pattern's files (local and gs:// alike).
"""

from __future__ import annotations

import calendar
import dataclasses
import datetime
import glob
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal


@dataclasses.dataclass(frozen=True)
class FileFormat:
    builder: str  # the `datasets` builder that reads it: csv, json, parquet, arrow, text
    options: Mapping[str, str] = dataclasses.field(default_factory=dict)  # the builder's arguments (a TSV's tab)


# By extension: `--dataset reviews.csv` and `--input rows.tsv.gz` just work.
FORMATS: Mapping[str, FileFormat] = {
    ".csv": FileFormat("csv"),
    ".tsv": FileFormat("csv", {"delimiter": "\t"}),
    ".json": FileFormat("json"),
    ".jsonl": FileFormat("json"),
    ".parquet": FileFormat("parquet"),
    ".arrow": FileFormat("arrow"),
    ".txt": FileFormat("text"),
}
# Read through on the fly by `datasets` (fsspec) and by Beam's filesystems alike.
COMPRESSIONS = (".gz", ".bz2", ".xz", ".zst")

SavedKind = Literal["dataset", "dataset_dict"]


def file_format(path: str) -> FileFormat | None:
    """The format of a data file or glob (`x.csv`, `data/*.jsonl.gz`) by its extension; None for anything else."""
    return FORMATS.get(Path(uncompressed_name(path)).suffix)


def uncompressed_name(path: str) -> str:
    """The name without a compression suffix, lower case: the extension left is the format's."""
    stem = path.lower()
    for compression in COMPRESSIONS:
        stem = stem.removesuffix(compression)
    return stem


def saved_kind(path: str | Path) -> SavedKind | None:
    """'dataset' for a Dataset.save_to_disk folder, 'dataset_dict' for a DatasetDict's, None for anything else."""
    folder = Path(path).expanduser()
    if (folder / "dataset_dict.json").is_file():
        return "dataset_dict"
    if (folder / "state.json").is_file():  # not dataset_info.json alone: a hub dataset's clone may carry one
        return "dataset"
    return None


def is_listable(pattern: str) -> bool:
    """Whether files behind a pattern can be listed here: local paths and gs:// (not hf:// or https://)."""
    return "://" not in pattern or pattern.startswith("gs://")


def matched_files(pattern: str) -> list[str]:
    """The files a local or gs:// path or glob names, sorted, in the pattern's own form (a relative pattern gives
    relative paths). Remote patterns are listed through fsspec, the filesystems `datasets` reads them with."""
    if "://" not in pattern:
        return sorted(glob.glob(os.path.expanduser(pattern)))
    filesystem, path = _remote(pattern)
    return sorted(filesystem.unstrip_protocol(found) for found in filesystem.glob(path))


def _remote(url: str):
    """fsspec's filesystem for a URL, imported on use: the storage-event function reads span names without it."""
    import fsspec

    return fsspec.core.url_to_fs(url)


def exists(path: str) -> bool:
    if "://" not in path:
        return os.path.exists(os.path.expanduser(path))
    filesystem, inner = _remote(path)
    return filesystem.exists(inner)


def size_and_mtime(path: str) -> tuple[int, int]:
    """A file's size and modification time in nanoseconds, as TFX's filesystems give them (whole seconds for a
    local file, Cloud Storage's `updated` time for gs://), so fingerprints of earlier runs stay comparable."""
    if "://" not in path:
        stat = os.stat(os.path.expanduser(path))
        return stat.st_size, int(stat.st_mtime) * 10**9
    filesystem, inner = _remote(path)
    info = filesystem.info(inner)
    return int(info["size"]), rfc3339_nanos(info["updated"])


def rfc3339_nanos(text: str) -> int:
    """`2026-11-26T13:00:00.123Z` -> nanoseconds since the epoch, exactly (no float on the way)."""
    whole, _, fraction = text.rstrip("Z").partition(".")
    seconds = calendar.timegm(datetime.datetime.fromisoformat(whole).timetuple())
    return seconds * 10**9 + int((fraction or "0")[:9].ljust(9, "0"))
