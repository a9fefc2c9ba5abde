"""Runs the pipeline on this machine with LocalDagRunner and ML Metadata in sqlite, showing progress."""

from __future__ import annotations

import contextlib
import logging
import resource
import sys
import time
import warnings

from absl import logging as absl_logging
from tfx.orchestration import metadata
from tfx.orchestration import pipeline as tfx_pipeline
from tfx.orchestration.local.local_dag_runner import LocalDagRunner

from components.local_beam import local_beam_runner
from models.hardware import distribution
from pipeline.config.pipeline_config import PipelineConfig
from pipeline.orchestration import preflight, probe
from pipeline.orchestration.dag import create_pipeline
from pipeline.reporting.metadata_reader import summarize
from pipeline.reporting.run_summary import RunSummary


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


def check_run(config: PipelineConfig, *, stream=None) -> tuple[tfx_pipeline.Pipeline, probe.ProbeResult]:
    """Everything `run_local` checks before its first component, and nothing after: `hftfx run --check`.
    `stream`: where it reports; None is sys.stdout as it is at the call (a default bound at import would keep
    a stdout since replaced)."""
    with local_beam_runner():
        return prepare_run(config, stream=stream or sys.stdout)


def prepare_run(config: PipelineConfig, *, stream) -> tuple[tfx_pipeline.Pipeline, probe.ProbeResult]:
    """The run's preflight (pipeline/orchestration/preflight.py), what it chose shown, and its TFX pipeline, whose
    components check their own settings as they are built."""
    # Before anything initializes TensorFlow's devices (no component has run yet).
    distribution.configure_cpu_replicas(config.training.cpu_replicas)
    probed = preflight.preflight(config)
    config = probed.config
    spans = f", span {config.dataset.span} (reading spans {list(probed.window)})" if probed.window else ""
    print(
        f"[pipeline] dataset '{config.dataset.name}'{spans}: {probed.describe()}, "
        f"labels {list(config.dataset.label_names)}; model '{config.model.name}'"
        + (f" at commit {config.model.revision}" if probed.model_commit else ""),
        file=stream,
        flush=True,
    )
    if probed.architecture:
        print(f"[pipeline] model: {probed.architecture}", file=stream, flush=True)
    print(f"[pipeline] {describe_lengths(probed)}", file=stream, flush=True)
    print(f"[pipeline] recipe: {probed.recipe.describe()}", file=stream, flush=True)
    print(f"[pipeline] epochs: {probed.describe_epochs()}", file=stream, flush=True)
    print(f"[pipeline] start: {probed.describe_start()}", file=stream, flush=True)
    if config.tuning.enabled:
        print(f"[pipeline] tuning: {config.tuning.describe()}", file=stream, flush=True)
    if small := probed.small_test_split():
        print(f"[pipeline] warning: {small}", file=stream, flush=True)
    if (probed.windows or probed.lengths).cuts_most:
        print(f"[pipeline] warning: {length_options(probed)}", file=stream, flush=True)
    connection = metadata.sqlite_metadata_connection_config(config.metadata_sqlite)
    return create_pipeline(config, connection, probed.input_fingerprint), probed


def describe_lengths(probed: probe.ProbeResult) -> str:
    """The length choice and what it costs: training seconds per epoch on this machine at its matmul peak."""
    text = probed.describe_lengths()
    if probed.encoder is None:
        return text
    from models.hardware.machine_peak import matmul_peak
    from pipeline.machine.estimate import epoch_seconds

    peak = matmul_peak("float32", seconds=0.5)
    examples = (probed.split_sizes or {}).get("train")
    per = f"{examples:,} training texts" if examples else "1,000 training texts"
    trained = probed.trained_lengths
    scale = len(trained.profile.lengths) / max(1, len(probed.lengths.profile.lengths))
    seconds = epoch_seconds(
        trained, round((examples or 1000) * scale), probed.buckets.buckets, probed.encoder, peak.gflops
    )
    return f"{text}; training ~{seconds:,.0f} s per epoch of {per} on this machine ({peak.gflops:,.0f} GFLOP/s fp32)"


def length_options(probed: probe.ProbeResult) -> str:
    """What a user whose texts are mostly longer than the width can do, said before anything trains."""
    choice = probed.lengths
    longer = (
        f"the model holds at most {choice.width} tokens: a model with longer positions, or shorter texts"
        if choice.at_position_limit
        else "raise model.max_seq_length (or set it to auto)"
    )
    if probed.windows is not None:
        count = probed.windows.windows.count
        cut = f"{probed.windows.cut_share:.0%} of the training texts are longer than {count} windows hold"
        return f"{cut} and will be cut: raise model.max_windows (each window costs a training example)"
    if probed.config.model.long_texts == "truncate" and not probed.config.dataset.text_pair_column:
        longer += "; or keep each text's start and end (--long-texts head_tail), or all of it in windows "
        longer += "(--long-texts windows)"
    cut = f"{choice.cut_share:.0%} of the training texts are longer than {choice.width} tokens and will be cut"
    return f"{cut}: {longer}"


def _run_local(config: PipelineConfig, *, verbose: bool, stream, lock_held: bool) -> RunSummary:
    started = time.monotonic()
    pipeline, probed = prepare_run(config, stream=stream)
    lock = contextlib.nullcontext() if lock_held else preflight.pipeline_root_lock(config.pipeline_root)
    with lock, progress_reporting(stream, verbose):
        LocalDagRunner().run(pipeline)
    summary = summarize(config.metadata_sqlite, config.pipeline_name)
    summary.wall_seconds = time.monotonic() - started
    summary.peak_rss_bytes = peak_rss_bytes()
    summary.recipe = probed.recipe.describe()
    summary.lengths = probed.describe_lengths()
    return summary
