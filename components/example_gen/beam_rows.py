"""The ExampleGen's Beam transforms: shards in, examples out, read inside the workers.

The driver only lists shards; each worker opens the dataset once (`setup`), streams its shards and places
each row with `splitting`'s pure functions. Counts travel as Beam metrics (they work on every runner,
Dataflow included), so no row ever comes back to the launching process.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence

import apache_beam as beam
from absl import logging
from apache_beam.metrics.metric import Metrics, MetricsFilter

from components.example_gen import sources, splitting
from components.example_gen.config import DatasetConfig, dump_dataset_config, load_dataset_config

METRICS_NAMESPACE = "hf_example_gen"
PROGRESS_EVERY_ROWS = 100_000


class _ShardReader(beam.DoFn):
    """Opens the dataset once per worker; subclasses say what each row becomes."""

    def __init__(self, config: DatasetConfig):
        self._dumped_config = dump_dataset_config(config)

    def setup(self):
        self.config = load_dataset_config(self._dumped_config)
        self.source = sources.load_source(self.config)

    def records(self, shard: sources.Shard) -> Iterable[tuple[str, dict]]:
        for number, (where, record) in enumerate(sources.iter_shard(self.config, shard, self.source), 1):
            if number % PROGRESS_EVERY_ROWS == 0:
                logging.info("%s ('%s'): %d rows read", shard.name, shard.dataset_split, number)
            yield where, record


class ReadLabelValues(_ShardReader):
    """The raw label of every row (ClassLabel ids as names), for the distinct-values pass."""

    def process(self, shard: sources.Shard):
        feature = sources.label_feature(self.source, self.config, shard.dataset_split)
        column = self.config.label_column
        for _, record in self.records(shard):
            if column in record:
                yield splitting.label_value(record[column], feature)


class ReadRows(_ShardReader):
    """Every row of a shard as a `splitting.Row`; a blocking issue stops the run with the row named."""

    def __init__(self, config: DatasetConfig, label_names: Sequence[str], plan: splitting.SplitPlan):
        super().__init__(config)
        self._label_names = tuple(label_names)
        self._plan = plan

    def setup(self):
        super().setup()
        self._index = {name: i for i, name in enumerate(self._label_names)}

    def process(self, shard: sources.Shard):
        feature = sources.label_feature(self.source, self.config, shard.dataset_split)
        for where, record in self.records(shard):
            out = splitting.prepare_row(
                record, shard.dataset_split, where, self.config, self._index, feature, self._plan
            )
            if isinstance(out, splitting.RowIssue):
                if splitting.blocking(out, self.config):
                    raise splitting.issues_error([out], self.config, self._label_names)
                Metrics.counter(METRICS_NAMESPACE, f"dropped:{out.split}").inc()
            elif out is not None:
                yield out


def count_example(row: splitting.Row) -> splitting.Row:
    Metrics.counter(METRICS_NAMESPACE, f"rows:{row.split}").inc()
    for label_id in row.label_ids:
        Metrics.counter(METRICS_NAMESPACE, f"examples:{row.split}:{label_id}").inc()
    return row


def read_rows(pipeline, read: sources.DatasetRead, label_names: Sequence[str]) -> dict[str, beam.PCollection]:
    """Per TFX split, its rows: limits applied (the smallest ranks kept) and counted as examples."""
    splits = list(read.plan.origin)
    parts = (
        pipeline
        | "Shards" >> beam.Create(list(read.shards))
        | "ReadRows" >> beam.ParDo(ReadRows(read.config, label_names, read.plan))
        | "BySplit" >> beam.Partition(lambda row, _: splits.index(row.split), len(splits))
    )
    out = {}
    for name, part in zip(splits, parts, strict=True):
        if name in read.plan.limits:
            part = (
                part
                | f"Limit[{name}]" >> beam.combiners.Top.Smallest(read.plan.limits[name], key=lambda r: r.rank)
                | f"Unlist[{name}]" >> beam.FlatMap(lambda rows: rows)
            )
        out[name] = part | f"Count[{name}]" >> beam.Map(count_example)
    return out


def distinct_label_values(pipeline, read: sources.DatasetRead, output_dir: str) -> list:
    """One Beam pass over the label column: the distinct values, written as JSON to `output_dir` and returned; at
    most one past dataset.max_labels (enough to refuse the set, never an id column's millions)."""
    import tensorflow as tf

    path = os.path.join(output_dir, "label_values.json")
    with pipeline as p:
        _ = (
            p
            | "Shards" >> beam.Create(list(read.shards))
            | "ReadLabels" >> beam.ParDo(ReadLabelValues(read.config))
            | "Distinct" >> beam.Distinct()
            | "AtMost" >> beam.combiners.Sample.FixedSizeGlobally(read.config.max_labels + 1)
            | "Write" >> beam.Map(_write_json, path)
        )
    with tf.io.gfile.GFile(path) as f:
        return json.load(f)


def _write_json(value, path: str) -> None:
    import tensorflow as tf

    with tf.io.gfile.GFile(path, "w") as f:
        f.write(json.dumps(value))


def counters(result) -> Mapping[str, int]:
    """This namespace's counters of a finished pipeline, by name."""
    found = result.metrics().query(MetricsFilter().with_namespace(METRICS_NAMESPACE))["counters"]
    totals: dict[str, int] = {}
    for counter in found:
        value = counter.committed if counter.committed is not None else counter.attempted
        totals[counter.key.metric.name] = totals.get(counter.key.metric.name, 0) + int(value or 0)
    return totals


def split_counts(totals: Mapping[str, int], splits: Sequence[str]) -> tuple[dict, dict, dict]:
    """(label counts per split {split: {label id: n}}, rows dropped per split, rows per split) from the
    counters; a multi-label row counts once under each of its labels and once in its split's rows."""
    labels: dict[str, dict[int, int]] = {s: {} for s in splits}
    dropped = dict.fromkeys(splits, 0)
    rows = dict.fromkeys(splits, 0)
    for name, value in totals.items():
        kind, _, rest = name.partition(":")
        if kind == "examples":
            split, _, label = rest.partition(":")
            labels[split][int(label)] = value
        elif kind == "dropped":
            dropped[rest] = value
        elif kind == "rows":
            rows[rest] = value
    return labels, dropped, rows
