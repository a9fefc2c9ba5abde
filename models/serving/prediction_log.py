"""What a served model answered, kept for `hftfx monitor`: sampled rows as JSON lines, one folder a model version.

Layout (Hive-style partitions, so BigQuery external tables, Beam and pandas read it as they find it):
`<log_dir>/version=<model version>/date=YYYY-MM-DD/hour=HH/part-<host>-<pid>-<n>.jsonl` (a batch job's:
`part-batch-<time>-<shard>.jsonl`). A row is
{"time", "model_version", "signature", "text" | "text_sha256", "text_pair" | "text_pair_sha256", "chars",
"probabilities", and "label", "label_id", "confidence" (one label a row) or "labels" (multi-label)}.

Logging never delays or fails a request: the route hands the request's rows to a bounded queue (rows and bytes) and
a writer thread samples, serializes and writes them; when the queue is full the rows are dropped and counted. The
writer keeps the folder under its size cap and its retention by deleting the oldest shards. A shard cut off by a
crash ends in a partial line, which the reader skips and counts like any line that is not a row.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import hashlib
import json
import logging
import os
import queue
import random
import re
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from models.errors import UserError
from models.names import TEXT_FEATURES

TEXT_MODES = ("full", "hash")
SHARD_GLOB = "version=*/date=*/hour=*/part-*.jsonl"
_VERSION_FOLDER = re.compile(r"version=(?P<version>[^/]+)")


@dataclasses.dataclass(frozen=True)
class LogSettings:
    """The log's bounds; checked where users set them (models/serving/config.py)."""

    log_dir: str
    sample: float = 1.0  # the share of rows kept
    texts: str = "full"  # "hash": a row keeps its text's SHA-256 and length, not the text
    max_mb: float = 1024.0  # the folder's size, past which the oldest shards go
    retention_days: float = 30.0
    max_queued_rows: int = 100_000  # waiting for the writer, past which rows are dropped
    max_queued_mb: float = 64.0
    shard_mb: float = 64.0


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def log_rows(
    texts: dict[str, Sequence[str]], predictions: Sequence[dict], version: str, signature: str, mode: str, at: float
) -> list[dict]:
    """One log row per prediction: the texts (or their hashes) beside what the model answered."""
    stamp = datetime.datetime.fromtimestamp(at, datetime.UTC).isoformat(timespec="milliseconds")
    rows = []
    for i, prediction in enumerate(predictions):
        row = {"time": stamp, "model_version": version, "signature": signature}
        for name in TEXT_FEATURES:
            if name in texts:
                text = texts[name][i]
                row.update({name: text} if mode == "full" else {f"{name}_sha256": _digest(text)})
        row["chars"] = sum(len(texts[name][i]) for name in TEXT_FEATURES if name in texts)
        rows.append({**row, **prediction})
    return rows


def example_texts(serialized: Sequence[bytes], names: Sequence[str]) -> dict[str, list[str]]:
    """The text features of serialized tf.Examples (requests to serving_tf_example)."""
    from tensorflow.core.example import example_pb2

    texts: dict[str, list[str]] = {name: [] for name in names}
    for record in serialized:
        feature = example_pb2.Example.FromString(record).features.feature
        for name in names:
            values = feature[name].bytes_list.value
            texts[name].append(values[0].decode("utf-8", "replace") if values else "")
    return texts


class PredictionLog:
    """The bounded queue and its writer thread for one served model version."""

    def __init__(self, settings: LogSettings, model_version: str):
        self.settings, self.version = settings, model_version
        self.root = Path(settings.log_dir)
        self.folder = self.root / f"version={model_version}"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.logged = self.dropped = self.unwritten = 0
        self.failure = ""
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._queued_rows = self._queued_bytes = 0
        self._lock = threading.Lock()
        self._shard: Path | None = None
        self._file = None
        self._shards = 0
        self._random = random.Random()
        self._thread = threading.Thread(target=self._write_all, name="prediction-log", daemon=True)
        self._thread.start()
        self._keep_within_bounds()

    def record(self, signature: str, columns: dict[str, list[bytes]], predictions: list[dict]) -> None:
        """Queues one request's rows, or drops and counts them when the queue is full; never blocks."""
        rows, size = len(predictions), sum(len(value) for values in columns.values() for value in values)
        with self._lock:
            full = (
                self._queued_rows + rows > self.settings.max_queued_rows
                or self._queued_bytes + size > self.settings.max_queued_mb * 1e6
            )
            if full:
                self.dropped += rows
                return
            self._queued_rows += rows
            self._queued_bytes += size
        self._queue.put((time.time(), signature, columns, predictions, size))

    def close(self, timeout: float = 10.0) -> None:
        """Writes what is queued (within `timeout`), then closes the shard."""
        self._queue.put(None)
        self._thread.join(timeout)

    def closing_words(self) -> str:
        dropped = f", {self.dropped} dropped with the queue full" if self.dropped else ""
        failed = f", {self.unwritten} not written ({self.failure})" if self.unwritten else ""
        return f"logged {self.logged} rows to {self.folder}{dropped}{failed}"

    def _write_all(self) -> None:
        """Writes until closed; a write that fails (a full disk, a folder removed) costs its rows, counted, and
        the writer goes on: logging never stops serving, and a disk that frees up is written to again."""
        while True:
            item = self._queue.get()
            if item is None:
                break
            try:
                self._write(*item)
                if self._queue.empty() and self._file is not None:
                    self._file.flush()
            except (OSError, ValueError) as error:
                self._failed(len(item[3]), error)
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()

    def _failed(self, rows: int, error: Exception) -> None:
        if not self.unwritten:
            logging.getLogger(__name__).warning("the prediction log could not write to %s: %s", self.folder, error)
        self.unwritten += rows
        self.failure = f"{type(error).__name__}: {error}"
        if self._file is not None:  # the next rows start a new shard
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

    def _write(self, at: float, signature: str, columns: dict, predictions: list[dict], size: int) -> None:
        with self._lock:
            self._queued_rows -= len(predictions)
            self._queued_bytes -= size
        kept = [i for i in range(len(predictions)) if self._random.random() < self.settings.sample]
        if not kept:
            return
        if "examples" in columns:
            texts = example_texts([columns["examples"][i] for i in kept], TEXT_FEATURES)
            texts = {name: values for name, values in texts.items() if any(values)}
        else:
            texts = {name: [columns[name][i].decode("utf-8", "replace") for i in kept] for name in columns}
        rows = log_rows(texts, [predictions[i] for i in kept], self.version, signature, self.settings.texts, at)
        lines = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        self._shard_for(at, len(lines)).write(lines)
        self.logged += len(rows)

    def _shard_for(self, at: float, size: int):
        """The open shard, or a new one when the hour turned or it reached shard_mb."""
        hour = datetime.datetime.fromtimestamp(at, datetime.UTC)
        folder = self.folder / f"date={hour:%Y-%m-%d}" / f"hour={hour:%H}"
        if self._file is not None and self._shard.parent == folder and self._file.tell() + size <= self._shard_bytes:
            return self._file
        if self._file is not None:
            self._file.close()
        folder.mkdir(parents=True, exist_ok=True)
        self._shards += 1
        self._shard = folder / f"part-{socket.gethostname()}-{os.getpid()}-{int(at)}-{self._shards}.jsonl"
        self._file = open(self._shard, "a", encoding="utf-8")  # noqa: SIM115  (open across many writes)
        self._keep_within_bounds()
        return self._file

    @property
    def _shard_bytes(self) -> float:
        return self.settings.shard_mb * 1e6

    def _keep_within_bounds(self) -> None:
        keep_within_bounds(self.root, self.settings, self._shard)


def keep_within_bounds(root: Path, settings: LogSettings, keep: Path | None = None) -> None:
    """Deletes shards past the retention, then the oldest until the folder is within its size cap (never `keep`,
    the shard being written)."""
    now = time.time()
    shards = sorted(root.glob(SHARD_GLOB), key=_modified)
    total = sum(_size(shard) for shard in shards)
    for shard in shards:
        if shard == keep:
            continue
        old = now - _modified(shard) > settings.retention_days * 86_400
        if not old and total <= settings.max_mb * 1e6:
            break
        total -= _size(shard)
        shard.unlink(missing_ok=True)


def batch_shard_prefix(log_dir: str, version: str, at: float) -> str:
    """Where a batch job's log shards go (Beam adds -SSSSS-of-NNNNN.jsonl): the hour it was scored in."""
    hour = datetime.datetime.fromtimestamp(at, datetime.UTC)
    return f"{log_dir.rstrip('/')}/version={version}/date={hour:%Y-%m-%d}/hour={hour:%H}/part-batch-{int(at)}"


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


@dataclasses.dataclass
class LoggedWindow:
    """The rows of one model version read from a log folder, and what could not be read."""

    version: str
    rows: list[dict]
    skipped_lines: int = 0
    skipped_shards: int = 0
    other_versions: dict[str, int] = dataclasses.field(default_factory=dict)  # version: shards not read


def logged_versions(log_dir: str) -> dict[str, list[Path]]:
    """Shards by model version."""
    found: dict[str, list[Path]] = {}
    for shard in sorted(Path(log_dir).glob(SHARD_GLOB)):
        match = _VERSION_FOLDER.search(str(shard.relative_to(log_dir)))
        found.setdefault(match["version"], []).append(shard)
    return found


def _version_order(version: str) -> tuple:
    return (0, int(version), "") if version.isdigit() else (1, 0, version)


def read_window(
    log_dir: str, version: str | None = None, since: datetime.datetime | None = None, until=None
) -> LoggedWindow:
    """The rows one version logged between `since` and `until` (default: the newest version, all its rows).
    Lines that are not rows (a shard cut off mid-line, a corrupt one) are skipped and counted."""
    found = logged_versions(log_dir)
    if not found:
        raise UserError(f"{log_dir} holds no prediction logs ({SHARD_GLOB}): serve with --log-dir {log_dir}")
    if version is None:
        version = max(found, key=_version_order)
    elif version not in found:
        raise UserError(f"{log_dir} has no logs of model version {version}; it has {sorted(found, key=_version_order)}")
    window = LoggedWindow(version, [], other_versions={v: len(s) for v, s in found.items() if v != version})
    for shard in found[version]:
        for row in _shard_rows(shard, window):
            at = _time(row)
            if at is None or (since and at < since) or (until and at >= until):
                continue
            window.rows.append(row)
    return window


def _shard_rows(shard: Path, window: LoggedWindow) -> Iterator[dict]:
    try:
        handle = open(shard, encoding="utf-8", errors="strict")  # noqa: SIM115
    except OSError:
        window.skipped_shards += 1
        return
    with handle:
        try:
            for line in handle:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    window.skipped_lines += 1
                    continue
                if isinstance(row, dict) and isinstance(row.get("probabilities"), list):
                    yield row
                else:
                    window.skipped_lines += 1
        except (UnicodeDecodeError, OSError):
            window.skipped_shards += 1


def _time(row: dict) -> datetime.datetime | None:
    try:
        return datetime.datetime.fromisoformat(row["time"])
    except (KeyError, TypeError, ValueError):
        return None
