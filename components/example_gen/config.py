"""The `dataset` config section: where the examples come from and how they become train/eval/test.

The ExampleGen carries it as JSON (an execution parameter, so it compiles into the Vertex spec).
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import Field, PositiveFloat, PositiveInt, field_validator, model_validator

from components.example_gen import input_paths
from models.config_section import ConfigError, ConfigSection, Texts, build_section, flag, per_key_flags
from models.names import TEXT_FEATURE, TEXT_PAIR_FEATURE
from models.task import TaskContract, task_contract

TFX_SPLITS = ("train", "eval", "test")
Split = Literal[TFX_SPLITS]


class DatasetConfig(ConfigSection):
    """Where the examples come from and how they become train/eval/test.

    Span-versioned data: a `{SPAN}` in `data_files` or `split_files` (e.g. `data/span-{SPAN}/*.csv`) makes
    every folder (or file) matching it one span, numbered by its digits.
    """

    name: str = Field(
        "packaged:rotten_tomatoes",
        description="anything datasets.load_dataset takes (hub id, builder such as csv with data_files, local "
        "folder), a save_to_disk folder, a data file or glob (reviews.csv, data/*.jsonl: builder from the "
        "extension), or packaged:rotten_tomatoes",
        json_schema_extra=flag("--dataset"),
    )
    config_name: str | None = Field(
        None, description="the dataset's configuration name", json_schema_extra=flag("--dataset-config")
    )
    revision: str | None = Field(
        None, description="hub revision (branch, tag or commit)", json_schema_extra=flag("--dataset-revision")
    )
    data_files: Texts = Field(
        (),
        description="files or globs for builders such as csv / json / parquet; all go to the dataset's train split",
        json_schema_extra=flag("--data-files"),
    )
    # A fixed test set beside spanned training data is what makes "no worse than the serving model" fair.
    split_files: dict[str, Texts] = Field(
        default_factory=dict,
        description="files per dataset split, e.g. {train: [data/span-{SPAN}/*.csv], test: [data/golden/*.csv]}",
    )
    builder_options: dict[str, str] = Field(
        default_factory=dict,
        description="extra keyword arguments of the builder, e.g. {delimiter: ';'} for csv or {field: data} for json",
    )
    text_column: str = Field(
        "text", min_length=1, description="column holding the text", json_schema_extra=flag("--text-column")
    )
    text_pair_column: str = Field(
        "",
        description="column holding the second text of sentence-pair tasks (paraphrase, entailment); empty: one text",
        json_schema_extra=flag("--text-pair-column"),
    )
    label_column: str = Field(
        "label",
        min_length=1,
        description="column holding the label (a name, an id, or a list of them for multi-label tasks)",
        json_schema_extra=flag("--label-column"),
    )
    multi_label: bool = Field(
        False,
        description="rows carry any number of labels; set by the preflight when label_column holds lists, declared "
        "for a compiled (cloud) pipeline",
    )
    label_columns: Texts = Field(
        (), description="multi-label tasks as several 0/1 columns, each a label (instead of label_column)"
    )
    missing_text: Literal["error", "drop"] = Field(
        "error",
        description="rows whose text or label is missing: error stops with the rows named, drop leaves them out "
        "and reports how many per split",
        json_schema_extra=flag("--missing-text"),
    )
    slice_columns: Texts = Field(
        (),
        description="set from evaluation.slice_columns (set them there): the columns the examples carry, as "
        "strings, for the Evaluator's slices",
    )
    label_names: Texts = Field(
        (),
        description="the label set in id order; empty: the ClassLabel names, else the sorted distinct values",
        json_schema_extra=flag("--label-names"),
    )
    max_labels: PositiveInt = Field(
        1_000,
        description="the most distinct labels a run accepts, checked as soon as the label set is known: past it the "
        "label column is likely an id or free text, and per-class metrics grow with the square of the count",
    )
    split_sources: dict[Split, str] = Field(
        default_factory=lambda: {"train": "train", "eval": "validation", "test": "test"},
        description="TFX split -> dataset split; TFX splits whose dataset split is missing are carved from train",
    )
    split_ratios: dict[Split, PositiveFloat] = Field(
        default_factory=lambda: {"train": 0.8, "eval": 0.1, "test": 0.1},
        description="how train is carved into the TFX splits the dataset lacks (one ratio per TFX split)",
    )
    limits: dict[Split, PositiveInt] = Field(
        default_factory=dict,
        description="per TFX split: at most this many examples (a seeded sample); missing: all",
        json_schema_extra=per_key_flags(train="--train-limit", eval="--eval-limit", test="--test-limit"),
    )
    seed: int = Field(42, description="seeds the carving of splits and the sampling of limits")
    span: int = Field(0, ge=0, description="with {SPAN} patterns: 0 reads the newest span, N reads span N")
    span_window: int = Field(1, ge=1, description="how many spans (the chosen one and those before it) one run reads")
    span_digits: int = Field(
        0,
        ge=0,
        le=16,
        description="how {SPAN} folders are named: 0: 1, 2, ... 10 (no leading zeros); N: zero-padded to N digits "
        "(0001); a name in another form (span-03 beside span-3, non-ASCII digits) is refused, so one span has "
        "one name",
    )
    ready_marker: str = Field(
        "",
        description="a span counts only once this file (e.g. _SUCCESS) is in its folder, so a span being uploaded "
        "does not start a run on its first file; empty: as soon as a data file matches",
    )

    @field_validator("split_ratios")
    @classmethod
    def _a_ratio_per_split(cls, ratios: dict[str, float]) -> dict[str, float]:
        if set(ratios) != set(TFX_SPLITS):
            raise ValueError(f"needs a positive ratio for each of {list(TFX_SPLITS)}")
        return ratios

    @field_validator("label_names")
    @classmethod
    def _distinct_labels(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(names)) != len(names) or len(names) == 1:
            raise ValueError("should name at least two distinct labels (or be empty)")
        return names

    @field_validator("ready_marker")
    @classmethod
    def _a_file_name(cls, marker: str) -> str:
        if "/" in marker:
            raise ValueError("is a file name inside the span folder, without '/'")
        return marker

    @model_validator(mode="after")
    def _roles_and_sources(self) -> DatasetConfig:
        roles = {"text_column": self.text_column}
        if self.text_pair_column:
            roles["text_pair_column"] = self.text_pair_column
        if self.label_columns:
            roles.update({f"label_columns[{i}]": column for i, column in enumerate(self.label_columns)})
        else:
            roles["label_column"] = self.label_column
        if len(set(roles.values())) != len(roles):
            raise ValueError(f"dataset columns must differ: {', '.join(f'{k}={v!r}' for k, v in roles.items())}")
        both = sorted(set(self.slice_columns) & set(roles.values()))
        if both:
            raise ValueError(
                f"evaluation.slice_columns {both} holds a text or label column: the label is sliced already "
                "(label_name); slice by the other columns of the data"
            )
        if len(self.label_columns) == 1:
            raise ValueError(
                "dataset.label_columns names at least two 0/1 columns (one column is a binary label_column)"
            )
        if self.data_files and self.split_files:
            raise ValueError("set dataset.data_files (all to 'train') or dataset.split_files (per split), not both")
        return resolve_label_columns(resolve_file_dataset(self))

    def task_contract(self) -> TaskContract:
        """The task these examples train for, known before any component runs (label set declared or found)."""
        inputs = (TEXT_FEATURE, TEXT_PAIR_FEATURE) if self.text_pair_column else (TEXT_FEATURE,)
        return task_contract(self.label_names, inputs, self.multi_label)


def resolve_file_dataset(config: DatasetConfig) -> DatasetConfig:
    """`name: reviews.csv` -> `name: csv, data_files: [reviews.csv]` (with the builder's options)."""
    found = input_paths.file_format(config.name)
    if found is None or config.data_files or config.split_files:
        return config
    options = {**found.options, **config.builder_options}
    return config.model_copy(update={"name": found.builder, "data_files": (config.name,), "builder_options": options})


def resolve_label_columns(config: DatasetConfig) -> DatasetConfig:
    """`label_columns: [a, b]` is a multi-label task whose label set is those columns, in that order."""
    if not config.label_columns:
        return config
    if config.label_names and tuple(config.label_names) != tuple(config.label_columns):
        raise ConfigError(
            f"dataset.label_columns {list(config.label_columns)} are the label set; dataset.label_names "
            f"{list(config.label_names)} says otherwise: leave label_names out"
        )
    return config.model_copy(update={"multi_label": True, "label_names": tuple(config.label_columns)})


def dump_dataset_config(config: DatasetConfig) -> str:
    """The JSON form components carry as an execution parameter (compiles into the Vertex spec)."""
    return json.dumps(config.model_dump(mode="json"), sort_keys=True)


def load_dataset_config(text: str) -> DatasetConfig:
    return build_section(DatasetConfig, json.loads(text), "dataset")
