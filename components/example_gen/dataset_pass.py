"""The one pass over a dataset before its examples exist, in the order a user fixes what it finds:
open (spans, files, stream) -> schema -> rows (and their slice columns) -> label set -> placement -> split checks.

Every reader of a dataset runs this sequence; they differ only in the rows read in this process:
- the preflight: a bounded sample (SAMPLE); when that is not the whole dataset, the label set comes
  from one Beam pass over the label column;
- the ExampleGen's executor: none (`budget=None`): the label set from its Beam pass, then it places every row
  in Beam and runs `check_splits` on Beam's counts;
- drift's span reader and the doctor's estimate: every row (EVERY_ROW).
So a dataset one of them accepts, the others accept: multi-label lists, label sets and split checks alike.
"""

from __future__ import annotations

import collections
import dataclasses
import heapq
import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from components.example_gen import splitting
from components.example_gen.config import DatasetConfig
from components.example_gen.sources import DatasetRead, check_first_rows, check_schema, iter_shard, open_dataset


@dataclasses.dataclass(frozen=True)
class RowBudget:
    """How many rows of each dataset split to read in this process, and for how long (None: no bound)."""

    max_rows: int | None
    max_seconds: float | None


SAMPLE = RowBudget(20_000, 30.0)  # the preflight's: it costs the same whatever the dataset's size
EVERY_ROW = RowBudget(None, None)
LABEL_KIND_ROWS = SAMPLE.max_rows  # rows per split whose labels show whether it is multi-label, in every mode


@dataclasses.dataclass(frozen=True)
class Rows:
    """The rows read in this process: held (a bounded sample) or streamed again from the source at each use
    (every row, so memory does not grow with the data)."""

    read: DatasetRead
    held: dict[str, list[tuple[str, dict]]] | None  # dataset split -> (where, record); None: every row, streamed
    complete: bool  # every split was read to its end: checks on these rows hold for the whole dataset

    def rows(self, per_split: int | None = None) -> Iterator[tuple[str, str, dict]]:
        """(dataset split, where, record), at most `per_split` of each split."""
        for split in self.read.plan.routes:
            records = self.held.get(split, []) if self.held is not None else _split_records(self.read, split)
            for where, record in itertools.islice(records, per_split):
                yield split, where, record

    @property
    def held_rows(self) -> int:
        return sum(len(records) for records in (self.held or {}).values())

    def first(self) -> dict[str, dict]:
        """The first record of each dataset split that has one."""
        return {split: record for split, _, record in self.rows(per_split=1)}


def _split_records(read: DatasetRead, split: str) -> Iterator[tuple[str, dict]]:
    for shard in (s for s in read.shards if s.dataset_split == split):
        yield from iter_shard(read.config, shard, read.source)


def read_rows(read: DatasetRead, budget: RowBudget) -> Rows:
    """Up to `budget.max_rows` rows per dataset split, stopping once `budget.max_seconds` have passed."""
    if budget.max_rows is None and budget.max_seconds is None:
        return Rows(read, None, complete=True)
    deadline = time.monotonic() + (budget.max_seconds if budget.max_seconds is not None else float("inf"))
    limit = budget.max_rows if budget.max_rows is not None else float("inf")
    held: dict[str, list[tuple[str, dict]]] = {}
    complete = True
    for split in read.plan.routes:
        held[split] = []
        for where, record in _split_records(read, split):
            held[split].append((where, record))
            if len(held[split]) >= limit or time.monotonic() > deadline:
                complete = False
                break
        if not complete:
            break
    return Rows(read, held, complete)


def label_values(read: DatasetRead, records: Iterable[tuple[str, str, dict]]) -> Iterator[object]:
    """The raw label of each (dataset split, where, record), as the Beam distinct-values pass reads it."""
    for split, _, record in records:
        yield splitting.label_value(record.get(read.config.label_column), read.label_features.get(split))


def with_label_kind(read: DatasetRead, rows: Rows | None) -> DatasetRead:
    """The read with dataset.multi_label set when the label column's schema, or the labels of the first
    LABEL_KIND_ROWS rows of a split read here, hold lists."""
    if read.config.multi_label:
        return read
    lists = any(splitting.holds_lists(feature) for feature in read.label_features.values())
    if not lists and rows is not None:
        lists = any(isinstance(v, list | tuple) for v in label_values(read, rows.rows(LABEL_KIND_ROWS)))
    if lists:
        return dataclasses.replace(read, config=read.config.model_copy(update={"multi_label": True}))
    return read


DistinctLabels = Callable[[DatasetRead], Sequence[object]]  # one Beam pass: the label column's distinct values


def label_set(read: DatasetRead, rows: Rows | None, distinct_labels: DistinctLabels | None) -> list[str]:
    """Declared or ClassLabel names; else the distinct values, of the rows read here when they are the whole
    dataset and otherwise of one Beam pass over the label column (declare dataset.label_names to skip it)."""
    if read.known_labels is not None:
        names = read.known_labels
    elif rows is not None and rows.complete:
        names = splitting.names_from_values(label_values(read, rows.rows()), read.config.label_column)
    elif distinct_labels is not None:
        names = splitting.names_from_values(distinct_labels(read), read.config.label_column)
    else:
        raise ValueError("the label set needs every row read here or a distinct-values pass")
    splitting.check_label_count(names, read.config)
    return names


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
    for arrival, (split, where, record) in enumerate(records):
        out = splitting.prepare_row(
            record, split, where, read.config, index, read.label_features.get(split), read.plan
        )
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


def check_splits(
    read: DatasetRead, names: Sequence[str], label_counts: Mapping[str, Mapping[int, int]], totals: Mapping[str, int]
) -> None:
    """What every row placed must give each TFX split: examples, and the classes the metrics need."""
    splitting.check_split_counts(label_counts, names, read.plan, totals if read.config.multi_label else None)


@dataclasses.dataclass(frozen=True)
class DatasetPass:
    read: DatasetRead  # its config concrete: span resolved, multi_label as found
    label_names: list[str]
    placed: Placed | None  # the rows read here, placed per TFX split; None when none were read here
    complete: bool  # every row was read and placed here, so the split checks ran
    rows_read: int = 0  # rows held here (a sample's; rows streamed from the source are not counted)


def dataset_pass(
    config: DatasetConfig, budget: RowBudget | None, distinct_labels: DistinctLabels | None = None
) -> DatasetPass:
    """open -> schema -> rows -> label set -> placement -> split checks, reading `budget`'s rows here (None:
    none; the caller places every row itself, then calls check_splits)."""
    read = open_dataset(config)
    check_schema(read)
    rows = read_rows(read, budget) if budget is not None else None
    if rows is not None:
        check_first_rows(read, rows.first())  # CSV and JSON have no schema before their rows
        splitting.check_slice_values((record for _, _, record in rows.rows()), read.config)
    read = with_label_kind(read, rows)
    names = label_set(read, rows, distinct_labels)
    if rows is None:
        return DatasetPass(read, names, None, complete=False)
    placed = place(read, names, rows.rows())
    if rows.complete:
        check_splits(read, names, placed.label_counts(), placed.totals())
    return DatasetPass(read, names, placed, rows.complete, rows.held_rows)
