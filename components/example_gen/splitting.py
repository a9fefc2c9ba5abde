"""Pure decisions of the ExampleGen, one row at a time: label ids, the TFX split a row lands in, limits.

No I/O and no state across rows, so the same functions run inside Beam workers (shard by shard, on any
runner), in the preflight's bounded sample and in-process for small reads, and give the same answer everywhere.
A row's split is a hash of its content with the seed, as TFX's `hash_buckets` split config hashes the
example: the same row lands in the same split whatever the runner, the shard order or the machine, and exact
duplicates never straddle train and test.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence

import datasets

from components.example_gen.config import TFX_SPLITS, DatasetConfig
from models.errors import UserError
from models.names import MISSING_SLICE_VALUE


class DatasetContentError(UserError, ValueError):
    """The dataset's columns or values do not fit the config; the message names the fix."""


def text_roles(config: DatasetConfig) -> list[tuple[str, str]]:
    """(role, column) for the text columns, in segment order."""
    roles = [("text", config.text_column)]
    if config.text_pair_column:
        roles.append(("text_pair", config.text_pair_column))
    return roles


def column_roles(config: DatasetConfig) -> list[tuple[str, str]]:
    """(role, column) for the text columns, then the label column(s)."""
    labels = config.label_columns or (config.label_column,)
    return [*text_roles(config), *(("label", column) for column in labels)]


def check_features(features: datasets.Features | None, config: DatasetConfig, split_name: str) -> None:
    """Columns and their types, from the schema alone (sources whose schema is only known row by row, such as
    CSV and JSON, are checked by `prepare_row` instead)."""
    if features is None:
        return
    check_columns(list(features), config, split_name)
    check_slice_features(features, config)
    for role, column in text_roles(config):
        feature = features[column]
        if not (isinstance(feature, datasets.Value) and feature.dtype in ("string", "large_string")):
            raise DatasetContentError(
                f"{role} column '{column}' holds {feature}, not strings; point dataset.{role}_column at a string column"
            )


def check_columns(columns: Sequence[str], config: DatasetConfig, split_name: str) -> None:
    for role, column in column_roles(config):
        if column not in columns:
            key = "dataset.label_columns" if config.label_columns and role == "label" else f"dataset.{role}_column"
            raise DatasetContentError(
                f"{role} column '{column}' is not in split '{split_name}'; its columns are {list(columns)}. "
                f"Set {key} (--{role.replace('_', '-')}-column) to one of them."
            )
    absent = [column for column in config.slice_columns if column not in columns]
    if absent:
        raise DatasetContentError(
            f"slice column(s) {absent} not in split '{split_name}'; its columns are {list(columns)}. Name columns "
            "of the data in evaluation.slice_columns (or add the column to every split)"
        )


def check_slice_features(features: datasets.Features, config: DatasetConfig) -> None:
    """Slice columns hold one value per row: a string, number or boolean (a list cannot name one slice)."""
    for column in config.slice_columns:
        feature = features[column]
        if not isinstance(feature, datasets.Value | datasets.ClassLabel):
            raise DatasetContentError(
                f"slice column '{column}' holds {feature}, not one string, number or boolean per row: slice by a "
                "column of single values (evaluation.slice_columns)"
            )


# A slice column with more distinct values than this in the preflight's sample is an identifier or a measurement, not
# a segment: most of its slices would hold a handful of test rows, too few to report or gate.
MAX_SLICE_VALUES = 50


def slice_value(value: object, column: str, where: str) -> str:
    """The slice a row's value names, as the examples carry it: strings as they are, integers and booleans
    spelled (1, true), a missing value as MISSING_SLICE_VALUE."""
    if value is None:
        return MISSING_SLICE_VALUE
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str | int | float):
        return str(value)
    raise DatasetContentError(
        f"slice column '{column}' holds {value!r} ({where}), not one string, number or boolean: slice by a column "
        "of single values (evaluation.slice_columns)"
    )


def check_slice_values(records: Iterable[Mapping[str, object]], config: DatasetConfig) -> None:
    """Before any component, on the rows read: each slice column holds some values, not too many distinct ones,
    so its slices are segments a person reads; refused with the fix otherwise."""
    if not config.slice_columns:
        return
    values: dict[str, set] = {column: set() for column in config.slice_columns}
    rows = 0
    for record in records:
        rows += 1
        for column, seen in values.items():
            value = record.get(column)
            if value is not None and len(seen) <= MAX_SLICE_VALUES:
                seen.add(value)
    for column, seen in values.items():
        if not seen:
            raise DatasetContentError(
                f"slice column '{column}' has no value in the {rows:,} rows read: every row would fall in the slice "
                f"'{MISSING_SLICE_VALUE}'. Fill it, or take it out of evaluation.slice_columns"
            )
        if len(seen) > MAX_SLICE_VALUES:
            fractions = any(isinstance(v, float) and not v.is_integer() for v in seen)
            kind = "numbers with fractions (a measurement)" if fractions else "an identifier-like column"
            raise DatasetContentError(
                f"slice column '{column}' holds more than {MAX_SLICE_VALUES} distinct values in the {rows:,} rows "
                f"read, {kind}: most slices would hold a few test rows, too few to report or gate. Bucket it into "
                f"at most {MAX_SLICE_VALUES} named ranges or groups in a column of its own (e.g. '{column}_band') "
                "and slice by that, or take it out of evaluation.slice_columns"
            )


# ---- the label set ----------------------------------------------------------------------------------------


def known_label_names(config: DatasetConfig, label_features: Iterable[object]) -> list[str] | None:
    """The label set without reading rows: declared in config, else the ClassLabel's names; None if neither."""
    if config.label_names:
        return list(config.label_names)
    for feature in label_features:
        feature = getattr(feature, "feature", feature)  # a list of ClassLabel ids names its classes too
        if isinstance(feature, datasets.ClassLabel):
            return list(feature.names)
    return None


def holds_lists(feature: object) -> bool:
    """A label column whose schema says each row holds a list (a multi-label column)."""
    return isinstance(feature, datasets.List | datasets.LargeList)


def names_from_values(values: Iterable[object], column: str = "label") -> list[str]:
    """Sorted distinct label values; integer labels keep their numeric order (2 before 10). Numbers with a
    fraction are scores, not classes: refused rather than each becoming a class of its own."""
    distinct = set()
    for value in values:
        if isinstance(value, list | tuple):  # a multi-label row: each of its labels
            distinct.update(v for v in value if v is not None)
        elif value is not None:
            distinct.add(value)
    scores = sorted(v for v in distinct if isinstance(v, float) and not v.is_integer())
    if scores:
        raise DatasetContentError(
            f"the label column '{column}' holds numbers with fractions ({', '.join(map(str, scores[:5]))}"
            f"{', ...' if len(scores) > 5 else ''}): scores for regression, which this pipeline does not train. "
            "Point dataset.label_column at a column of classes, or bin the scores into named classes first"
        )
    if all(isinstance(v, int | bool) for v in distinct):
        return [str(v) for v in sorted(distinct)]
    return sorted({str(v) for v in distinct})


def check_label_count(names: Sequence[str], config: DatasetConfig) -> None:
    """At least two labels, at most dataset.max_labels (the distinct-values pass keeps one past it)."""
    if len(names) > config.max_labels:
        column = f"columns {list(config.label_columns)}" if config.label_columns else f"column '{config.label_column}'"
        raise DatasetContentError(
            f"the label {column} has more than dataset.max_labels {config.max_labels:,} distinct values "
            f"({len(names):,} found, first {list(names[:5])}): a column of ids or free text rather than classes? "
            "Every class needs examples in each split, and the Evaluator's per-class metrics and confusion matrix "
            "grow with the square of the count. Point dataset.label_column (--label-column) at the column of "
            "classes, or raise the limit (--set dataset.max_labels=N)"
        )
    if len(names) < 2:
        raise DatasetContentError(
            f"the label column '{config.label_column}' has {len(names)} distinct value(s) {list(names)}; "
            "a classifier needs at least two"
        )


def label_value(value: object, feature: object) -> object:
    """The raw label as the distinct-values pass sees it: ClassLabel ids become names; missing is None."""
    inner = getattr(feature, "feature", None)
    if isinstance(value, list | tuple) and isinstance(inner, datasets.ClassLabel):
        return [inner.int2str(v) for v in value]
    if isinstance(feature, datasets.ClassLabel):
        return feature.int2str(value) if value is not None and value >= 0 else None
    return value


def row_label(record: Mapping[str, object], config: DatasetConfig, feature: object, where: str) -> object:
    """The row's label as a name-like value, or a list of them for multi-label rows; None when missing. Rows
    whose label has the wrong shape for the task are refused with the row named and the fix."""
    if config.label_columns:
        values = [record[column] for column in config.label_columns]
        if any(v is None for v in values):
            return None
        for column, value in zip(config.label_columns, values, strict=True):
            if str(value).strip().lower() not in ("0", "1", "true", "false", "0.0", "1.0"):
                raise DatasetContentError(
                    f"label column '{column}' holds {value!r} ({where}); each of dataset.label_columns holds 0 or 1 "
                    "(or true/false): is the row tagged with that label"
                )
        flags = [str(v).strip().lower() in ("1", "true", "1.0") for v in values]
        return [column for column, flag in zip(config.label_columns, flags, strict=True) if flag]
    value = label_value(record[config.label_column], feature)
    column = config.label_column
    if config.multi_label and value is not None:
        if not isinstance(value, list | tuple) or any(isinstance(v, list | tuple | dict) for v in value):
            raise DatasetContentError(
                f"label column '{column}' holds {value!r} ({where}), not a list of labels: a multi-label row holds "
                'its labels as a list (["sports", "politics"], [] for none). Fix the row, or set '
                "dataset.multi_label: false if each row has one label"
            )
    elif isinstance(value, list | tuple):
        raise DatasetContentError(
            f"label column '{column}' holds a list {value!r} ({where}): a multi-label task. Set dataset.multi_label:"
            " true (--set dataset.multi_label=true); `hftfx run` sets it when its sample shows lists first"
        )
    return value


# ---- where a row goes ---------------------------------------------------------------------------------------


def unit_hash(seed: int, salt: str, parts: Sequence[object]) -> float:
    """A stable number in [0, 1) for a row: the same on every machine, runner and Python process."""
    digest = hashlib.blake2b(json.dumps([seed, salt, *parts]).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


@dataclasses.dataclass(frozen=True)
class SplitPlan:
    """Which TFX split each dataset split's rows go to: one, or several by hash with cumulative bounds."""

    routes: Mapping[str, tuple[tuple[str, float], ...]]  # dataset split -> ((TFX split, upper bound), ...)
    origin: Mapping[str, str]  # TFX split -> where its rows come from, for logs and the run summary
    limits: Mapping[str, int]
    seed: int

    def route(self, dataset_split: str, bucket: float) -> str:
        for target, upper in self.routes[dataset_split]:
            if bucket < upper:
                return target
        return self.routes[dataset_split][-1][0]


def plan_splits(dataset_splits: Sequence[str], config: DatasetConfig) -> SplitPlan:
    """Maps dataset splits onto train/eval/test; TFX splits with no source are carved from train by hash.

    Dataset splits that feed no TFX split are not read at all.
    """
    train_source = config.split_sources.get("train", "train")
    if train_source not in dataset_splits:
        raise DatasetContentError(
            f"the dataset has no '{train_source}' split; it has {list(dataset_splits)}. "
            "Set dataset.split_sources.train."
        )
    mapped = {t: config.split_sources.get(t, t) for t in TFX_SPLITS}
    present = {t: s for t, s in mapped.items() if s in dataset_splits}
    carve = [t for t in TFX_SPLITS if t not in present]
    routes: dict[str, tuple[tuple[str, float], ...]] = {s: ((t, 1.0),) for t, s in present.items()}
    origin = {t: f"dataset split '{s}'" for t, s in present.items()}
    if carve:
        targets = ["train", *carve]
        total = sum(config.split_ratios[t] for t in targets)
        bounds, upper = [], 0.0
        for target in targets:
            upper += config.split_ratios[target] / total
            bounds.append((target, upper))
            share = config.split_ratios[target] / total
            origin[target] = f"{share:.0%} of '{present['train']}' (hashed per row, seed {config.seed})"
        routes[present["train"]] = tuple(bounds)
    for target, limit in config.limits.items():
        origin[target] += f", limited to {limit}"
    return SplitPlan(routes=routes, origin=origin, limits=dict(config.limits), seed=config.seed)


# ---- one row ------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Row:
    """One example: its TFX split, texts and label id, and its rank for `dataset.limits` (smallest kept; 0 in a
    split without a limit, where nothing reads it)."""

    split: str
    text: str
    text_pair: str | None
    label_ids: tuple[int, ...]  # one id; for multi-label the row's labels, in id order (empty: none apply)
    rank: float
    slices: tuple[str, ...] = ()  # the row's value of each of dataset.slice_columns (slice_value)

    @property
    def label_id(self) -> int:
        (label_id,) = self.label_ids
        return label_id


@dataclasses.dataclass(frozen=True)
class RowIssue:
    """A row that cannot become an example: missing values (by role) or a label outside the set."""

    split: str
    where: str  # e.g. "row 7 of data.csv": enough to find it
    missing: tuple[str, ...] = ()
    unknown_label: str | None = None


def prepare_row(
    record: Mapping[str, object],
    dataset_split: str,
    where: str,
    config: DatasetConfig,
    label_index: Mapping[str, int],
    label_feature: object,
    plan: SplitPlan,
) -> Row | RowIssue | None:
    """The example one dataset row becomes, an issue with it, or None for a split no TFX split reads.

    Empty and whitespace-only texts are kept: they tokenize to [CLS] [SEP] and are classified like any text.
    """
    if dataset_split not in plan.routes:
        return None
    roles = column_roles(config)
    if any(column not in record for column in [*(c for _, c in roles), *config.slice_columns]):
        check_columns(list(record), config, dataset_split)
    texts = []
    for role, column in text_roles(config):
        value = record[column]
        if value is not None and not isinstance(value, str):
            raise DatasetContentError(
                f"{role} column '{column}' holds {type(value).__name__} values such as {value!r} ({where}), not "
                f"strings; point dataset.{role}_column at a string column"
            )
        texts.append(value)
    label = row_label(record, config, label_feature, where)
    missing = tuple(role for (role, _), v in zip([*text_roles(config), ("label", "")], [*texts, label], strict=True)
                    if v is None)  # fmt: skip
    bucket_of = (*texts, None if label is None else str(label))
    split = plan.route(dataset_split, unit_hash(plan.seed, "split", bucket_of))
    if missing:
        return RowIssue(split, where, missing=missing)
    labels = label if isinstance(label, list | tuple) else [label]
    unknown = [str(v) for v in labels if str(v) not in label_index]
    if unknown:
        return RowIssue(split, where, unknown_label=unknown[0])
    label_ids = tuple(sorted({label_index[str(v)] for v in labels}))
    pair = texts[1] if config.text_pair_column else None
    rank = unit_hash(plan.seed, "limit", bucket_of) if split in plan.limits else 0.0
    slices = tuple(slice_value(record[column], column, where) for column in config.slice_columns)
    return Row(split, texts[0], pair, label_ids, rank, slices)


def issues_error(issues: Sequence[RowIssue], config: DatasetConfig, names: Sequence[str]) -> DatasetContentError:
    """One error for the issues found in a split: missing values first (the fix differs), then unknown labels."""
    split = issues[0].split
    missing: dict[str, list[str]] = collections.defaultdict(list)
    for issue in issues:
        for role in issue.missing:
            missing[role].append(issue.where)
    if missing:
        shown = "; ".join(f"{role} in {len(rows)} row(s), first {rows[0]}" for role, rows in missing.items())
        return DatasetContentError(
            f"split '{split}' has missing values: {shown}. Fill them, or leave those rows out with "
            "dataset.missing_text: drop (--missing-text drop); the run reports how many were dropped."
        )
    unknown = sorted({i.unknown_label for i in issues if i.unknown_label is not None})
    shown_labels = [u or "<missing>" for u in unknown[:10]]
    return DatasetContentError(
        f"split '{split}' has labels outside the label set {list(names)}: {shown_labels}"
        f"{' ...' if len(unknown) > 10 else ''}. Fix the data, or declare them in dataset.label_names."
    )


def blocking(issue: RowIssue, config: DatasetConfig) -> bool:
    """Whether an issue stops the run; missing values are dropped (and counted) with missing_text: drop."""
    return not (issue.missing and config.missing_text == "drop")


# ---- the whole output -----------------------------------------------------------------------------------


def check_split_counts(
    label_counts: Mapping[str, Mapping[int, int]],
    names: Sequence[str],
    plan: SplitPlan,
    totals: Mapping[str, int] | None = None,
) -> None:
    """After every row is placed: no empty split, two classes or more in each, every class in train. With
    `totals` (rows per split), a multi-label task: every label tagged in train, and in test every label both
    tagged and untagged somewhere (its AUC is undefined otherwise)."""
    sizes = totals if totals is not None else {s: sum(label_counts.get(s, {}).values()) for s in TFX_SPLITS}
    for split in TFX_SPLITS:
        if not sizes.get(split):
            raise DatasetContentError(
                f"split '{split}' ({plan.origin[split]}) is empty; give it data or change dataset.split_ratios"
            )
    if totals is not None:
        _check_multi_label_counts(label_counts, names, totals)
        return
    for split in TFX_SPLITS:
        present = sorted(i for i, n in label_counts[split].items() if n)
        if len(present) < 2:
            raise DatasetContentError(
                f"split '{split}' holds a single class ('{names[present[0]]}'): it can neither train nor measure "
                "a classifier (AUC is undefined). Add examples of the other classes or fix dataset.split_sources."
            )
    missing = sorted(set(range(len(names))) - {i for i, n in label_counts["train"].items() if n})
    if missing:
        raise DatasetContentError(
            f"the train split has no examples of {[names[i] for i in missing]}; add some or drop the class "
            "from dataset.label_names"
        )


def _check_multi_label_counts(label_counts, names: Sequence[str], totals: Mapping[str, int]) -> None:
    tagged = label_counts.get("train", {})
    never = [names[i] for i in range(len(names)) if not tagged.get(i)]
    if never:
        raise DatasetContentError(
            f"no train example is tagged {never}: a model cannot learn a label it never sees. Add examples, or "
            "leave the label out of dataset.label_names (dataset.label_columns)"
        )
    test = label_counts.get("test", {})
    undefined = [names[i] for i in range(len(names)) if test.get(i, 0) in (0, totals["test"])]
    if undefined:
        raise DatasetContentError(
            f"in the test split, {undefined} tag no example or every example: their AUC is undefined and the "
            "Evaluator's macro AUC with them. Give the test split examples with and without each label"
        )
