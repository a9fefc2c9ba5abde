"""Pure decisions of the ExampleGen: label ids, TFX splits, limits. No I/O, so each is tested directly."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import datasets

from pipeline.configs import TFX_SPLITS, DatasetConfig
from pipeline.errors import UserError


class DatasetContentError(UserError, ValueError):
    """The dataset's columns or values do not fit the config; the message names the fix."""


@dataclasses.dataclass(frozen=True)
class SplitRows:
    """One TFX split: texts (and pair texts) and int label ids, in a deterministic order."""

    texts: list[str]
    label_ids: list[int]
    text_pairs: list[str] | None = None  # sentence-pair datasets only
    dropped: int = 0  # rows left out for a missing text or label (dataset.missing_text: drop)

    def rows(self):
        """(text, text_pair or None, label id) per example."""
        pairs = self.text_pairs if self.text_pairs is not None else [None] * len(self.texts)
        return zip(self.texts, pairs, self.label_ids, strict=True)


def check_columns(source: datasets.DatasetDict, config: DatasetConfig) -> None:
    for split_name, split in source.items():
        columns = list(split.column_names)
        for role, column in _column_roles(config):
            if column not in columns:
                raise DatasetContentError(
                    f"{role} column '{column}' is not in split '{split_name}'; its columns are {columns}. "
                    f"Set dataset.{role}_column (--{role.replace('_', '-')}-column) to one of them."
                )
        for role, column in _column_roles(config)[:-1]:
            feature = split.features[column]
            if not (isinstance(feature, datasets.Value) and feature.dtype in ("string", "large_string")):
                raise DatasetContentError(
                    f"{role} column '{column}' holds {feature}, not strings; "
                    f"point dataset.{role}_column at a string column"
                )


def _column_roles(config: DatasetConfig) -> list[tuple[str, str]]:
    """(role, column) for the text columns, then the label column last."""
    roles = [("text", config.text_column)]
    if config.text_pair_column:
        roles.append(("text_pair", config.text_pair_column))
    return [*roles, ("label", config.label_column)]


def label_names(source: datasets.DatasetDict, config: DatasetConfig) -> list[str]:
    """The label set in id order: declared in config, else ClassLabel names, else sorted distinct values."""
    if config.label_names:
        return list(config.label_names)
    features = [split.features[config.label_column] for split in source.values()]
    if isinstance(features[0], datasets.ClassLabel):
        return list(features[0].names)
    values = set()
    for split in source.values():
        values.update(v for v in split.unique(config.label_column) if v is not None)
    if all(isinstance(v, int | bool) for v in values):
        return [str(v) for v in sorted(values)]  # integer labels keep their numeric order: 2 before 10
    return sorted(str(v) for v in values)


def _label_strings(split: datasets.Dataset, column: str) -> list[str]:
    feature = split.features[column]
    raw = split[column]
    if isinstance(feature, datasets.ClassLabel):
        return [feature.int2str(v) if v is not None and v >= 0 else "" for v in raw]
    return ["" if v is None else str(v) for v in raw]


def label_ids(split: datasets.Dataset, column: str, names: Sequence[str], split_name: str) -> list[int]:
    index = {name: i for i, name in enumerate(names)}
    strings = _label_strings(split, column)
    unknown = sorted({s for s in strings if s not in index})
    if unknown:
        shown = [u or "<missing>" for u in unknown[:10]]
        raise DatasetContentError(
            f"split '{split_name}' has labels outside the label set {list(names)}: {shown}"
            f"{' ...' if len(unknown) > 10 else ''}. Fix the data, or declare them in dataset.label_names."
        )
    return [index[s] for s in strings]


def _ratios_for(targets: Sequence[str], ratios: Mapping[str, float]) -> list[float]:
    total = sum(ratios[t] for t in targets)
    return [ratios[t] / total for t in targets]


def assign_splits(
    source: datasets.DatasetDict, config: DatasetConfig
) -> tuple[dict[str, datasets.Dataset], dict[str, str]]:
    """Maps dataset splits onto train/eval/test; TFX splits with no source are carved from train, seeded.

    Returns the splits and, per TFX split, where it came from (for the run summary).
    """
    if "train" not in source and config.split_sources.get("train", "train") not in source:
        raise DatasetContentError(
            f"the dataset has no '{config.split_sources.get('train', 'train')}' split; "
            f"it has {list(source)}. Set dataset.split_sources.train."
        )
    mapped = {t: config.split_sources.get(t, t) for t in TFX_SPLITS}
    present = {t: s for t, s in mapped.items() if s in source}
    carve = [t for t in TFX_SPLITS if t not in present]
    splits = {t: source[s] for t, s in present.items()}
    origin = {t: f"dataset split '{s}'" for t, s in present.items()}
    if carve:
        base = source[present["train"]]
        targets = ["train", *carve]
        shuffled = base.shuffle(seed=config.seed)
        edges, start = [], 0
        for fraction in _ratios_for(targets, config.split_ratios)[:-1]:
            start += round(fraction * len(shuffled))
            edges.append(start)
        bounds = list(zip([0, *edges], [*edges, len(shuffled)], strict=True))
        for target, (lo, hi) in zip(targets, bounds, strict=True):
            splits[target] = shuffled.select(range(lo, hi))
            origin[target] = f"{(hi - lo) / max(len(shuffled), 1):.0%} of '{present['train']}' (seed {config.seed})"
    for target, limit in config.limits.items():
        if len(splits[target]) > limit:
            splits[target] = splits[target].shuffle(seed=config.seed).select(range(limit))
            origin[target] += f", limited to {limit}"
    for target in TFX_SPLITS:
        if len(splits[target]) == 0:
            raise DatasetContentError(
                f"split '{target}' ({origin[target]}) is empty; give it data or change dataset.split_ratios"
            )
    return splits, origin


def _missing_rows(split: datasets.Dataset, config: DatasetConfig) -> dict[str, list[int]]:
    """Row indices with a missing value, per role: None texts, None labels, ClassLabel's -1."""
    missing = {}
    for role, column in _column_roles(config):
        values = split[column]
        is_class = isinstance(split.features[column], datasets.ClassLabel)
        rows = [i for i, v in enumerate(values) if v is None or (is_class and v < 0)]
        if rows:
            missing[role] = rows
    return missing


def split_rows(split: datasets.Dataset, config: DatasetConfig, names: Sequence[str], split_name: str) -> SplitRows:
    """Texts and label ids of one split. Arrow string columns hold valid UTF-8 only (invalid bytes fail at
    load time, in `sources`); missing values arrive here as None: an error naming the rows, or dropped.

    Empty and whitespace-only texts are kept: they tokenize to [CLS] [SEP] and are classified like any text.
    """
    missing = _missing_rows(split, config)
    dropped = sorted({i for rows in missing.values() for i in rows})
    if dropped and config.missing_text != "drop":
        shown = "; ".join(f"{role} in {len(rows)} row(s), first row {rows[0]}" for role, rows in missing.items())
        raise DatasetContentError(
            f"split '{split_name}' has missing values: {shown}. Fill them, or leave those rows out with "
            "dataset.missing_text: drop (--missing-text drop); the run reports how many were dropped."
        )
    if dropped:
        keep = sorted(set(range(len(split))) - set(dropped))
        split = split.select(keep)
    pairs = list(split[config.text_pair_column]) if config.text_pair_column else None
    return SplitRows(
        texts=list(split[config.text_column]),
        label_ids=label_ids(split, config.label_column, names, split_name),
        text_pairs=pairs,
        dropped=len(dropped),
    )


def check_label_coverage(rows: dict[str, SplitRows], names: Sequence[str]) -> None:
    """Every split needs two classes or more, and train needs every class the model is asked to predict."""
    for split_name, split in rows.items():
        present = sorted(set(split.label_ids))
        if len(present) < 2:
            only = names[present[0]] if present else "none"
            raise DatasetContentError(
                f"split '{split_name}' holds a single class ('{only}'): it can neither train nor measure a "
                "classifier (AUC is undefined). Shuffle the data before splitting or fix dataset.split_sources."
            )
    missing = sorted(set(range(len(names))) - set(rows["train"].label_ids))
    if missing:
        raise DatasetContentError(
            f"the train split has no examples of {[names[i] for i in missing]}; add some or drop the class "
            "from dataset.label_names"
        )


@dataclasses.dataclass(frozen=True)
class PreparedDataset:
    label_names: list[str]
    rows: dict[str, SplitRows]
    origin: dict[str, str]
    source_fingerprints: list[str]

    @property
    def dropped(self) -> dict[str, int]:
        """Rows left out per split for a missing text or label."""
        return {name: split.dropped for name, split in self.rows.items()}


def prepare(source: datasets.DatasetDict, config: DatasetConfig) -> PreparedDataset:
    """Every check and decision between the raw dataset and the examples, in one place for the ExampleGen
    and for the probe that runs it before any expensive work."""
    check_columns(source, config)
    names = label_names(source, config)
    if len(names) < 2:
        raise DatasetContentError(
            f"the label column '{config.label_column}' has {len(names)} distinct value(s) {names}; "
            "a classifier needs at least two"
        )
    splits, origin = assign_splits(source, config)
    rows = {name: split_rows(splits[name], config, names, name) for name in splits}
    check_label_coverage(rows, names)
    return PreparedDataset(names, rows, origin, [source[s]._fingerprint for s in sorted(source)])
