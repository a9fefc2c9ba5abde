"""Runs the pipeline on this machine with LocalDagRunner and ML Metadata in sqlite, showing progress."""

from __future__ import annotations

import contextlib
import logging
import resource
import sys
import time
import warnings
from typing import TYPE_CHECKING

from absl import logging as absl_logging

from components.local_beam import local_beam_runner
from models.hardware import distribution
from pipeline.config.pipeline_config import PipelineConfig
from pipeline.orchestration.choose import Choices, choose
from pipeline.orchestration.preflight import preflight
from pipeline.orchestration.root_lock import pipeline_root_lock
from pipeline.reporting.run_summary import RunSummary

if TYPE_CHECKING:
    from tfx.orchestration import pipeline as tfx_pipeline


class ComponentProgress(logging.Handler):
    """Turns LocalDagRunner's 'Component X is running/finished' records into timed progress lines."""

    def __init__(self, stream):
        super().__init__(logging.INFO)
        self.stream, self.started = stream, {}

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if not message.startswith("Component ") or not message.endswith((" is running.", " is finished.")):
            return
        name = message.split(" ")[1]
        if message.endswith("running."):
            self.started[name] = time.monotonic()
            print(f"[pipeline] {name} ...", file=self.stream, flush=True)
        else:
            seconds = time.monotonic() - self.started.get(name, time.monotonic())
            print(f"[pipeline] {name} done in {seconds:.1f}s", file=self.stream, flush=True)


@contextlib.contextmanager
def progress_reporting(stream, verbose: bool):
    """Shows component progress; TFX's and Beam's own INFO chatter only with verbose.

    Verbosity goes through absl's flag, not the logger level: TF code that silences logging for a while
    restores the flag's value afterwards.
    """
    absl_logger = absl_logging.get_absl_logger()
    absl_handler = absl_logging.get_absl_handler()
    handler = ComponentProgress(stream)
    saved = (absl_logging.get_verbosity(), absl_handler.level, absl_logger.propagate)
    absl_logging.set_verbosity(absl_logging.INFO)
    tf_logger = logging.getLogger("tensorflow")
    saved_tf_level = tf_logger.level
    if not verbose:
        absl_handler.setLevel(logging.WARNING)
        absl_logger.propagate = False  # Beam installs a root handler that would print every INFO record
        tf_logger.setLevel(logging.ERROR)  # deprecation notices from inside TFX/TFMA, not actionable here
    absl_logger.addHandler(handler)
    try:
        with warnings.catch_warnings():
            if not verbose:
                warnings.filterwarnings("ignore", category=RuntimeWarning, module="tensorflow_model_analysis")
            yield
    finally:
        tf_logger.setLevel(saved_tf_level)
        absl_logger.removeHandler(handler)
        absl_logging.set_verbosity(saved[0])
        absl_handler.setLevel(saved[1])
        absl_logger.propagate = saved[2]


def peak_rss_bytes() -> int:
    """Peak resident memory of this process (and any finished children), in bytes."""
    scale = 1 if sys.platform == "darwin" else 1024
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) * scale


def run_local(config: PipelineConfig, *, verbose: bool = False, stream=None, lock_held: bool = False) -> RunSummary:
    """Runs the pipeline once, reporting to `stream` (None: sys.stdout at the call). `lock_held`: the caller (a
    trigger) already holds the pipeline root's lock."""
    with local_beam_runner():
        return _run_local(config, verbose=verbose, stream=stream or sys.stdout, lock_held=lock_held)


def check_run(config: PipelineConfig, *, stream=None) -> tuple[tfx_pipeline.Pipeline, Choices]:
    """Everything `run_local` checks before its first component, and nothing after: `hftfx run --check`.
    `stream`: where it reports; None is sys.stdout as it is at the call (a default bound at import would keep
    a stdout since replaced). Runs no component: Beam's runner is the preflight's own to set (beam_label_values)."""
    return prepare_run(config, stream=stream or sys.stdout)


def prepare_run(config: PipelineConfig, *, stream) -> tuple[tfx_pipeline.Pipeline, Choices]:
    """Check (preflight.py), then choose (choose.py) and say the choices, then the TFX pipeline, whose components
    check their own settings as they are built."""
    # Before anything initializes TensorFlow's devices (no component has run yet).
    distribution.configure_cpu_replicas(config.training.cpu_replicas)
    chosen = choose(preflight(config))
    for line in chosen.lines():
        print(f"[pipeline] {line}", file=stream, flush=True)
    # TFX, seconds of imports, loads once the checks passed: a model or data refused costs none (nor --check's)
    from tfx.orchestration import metadata

    from pipeline.orchestration.dag import create_pipeline

    connection = metadata.sqlite_metadata_connection_config(chosen.config.metadata_sqlite)
    return create_pipeline(chosen.config, connection, chosen.input_fingerprint), chosen


def _run_local(config: PipelineConfig, *, verbose: bool, stream, lock_held: bool) -> RunSummary:
    started = time.monotonic()
    pipeline, chosen = prepare_run(config, stream=stream)
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner

    from pipeline.reporting.metadata_reader import summarize

    lock = contextlib.nullcontext() if lock_held else pipeline_root_lock(config.pipeline_root)
    with lock, progress_reporting(stream, verbose):
        LocalDagRunner().run(pipeline)
    summary = summarize(config.metadata_sqlite, config.pipeline_name)
    summary.wall_seconds = time.monotonic() - started
    summary.peak_rss_bytes = peak_rss_bytes()
    summary.recipe = summary.recipe or chosen.recipe.describe()  # the Trainer's where it recorded one
    summary.lengths = chosen.describe_lengths()
    return summary
