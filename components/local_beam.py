"""The Beam runner of local pipelines and `hftfx predict`, kept when a run passes Beam no `--runner`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

# Named rather than left to Beam's DirectRunner: since Beam 2.68 that first downloads Prism (a Go runner) from
# GitHub and runs there, falling back to FnApiRunner only when the download fails. Machines that reach GitHub
# would run every component on another runner than the one tested.
LOCAL_BEAM_RUNNER = "FnApiRunner"


@contextlib.contextmanager
def local_beam_runner() -> Iterator[None]:
    """Makes LOCAL_BEAM_RUNNER Beam's default runner while the block runs.

    Set as Beam's default rather than passed as `--runner`: given any Beam argument, TFX 1.21 builds an sdist of
    itself for every component (see PipelineConfig.beam_args). An explicit `--runner` still wins.
    """
    from apache_beam.options.pipeline_options import (
        StandardOptions,  # here: pipeline.config.pipeline_config imports this module
    )

    saved = StandardOptions.DEFAULT_RUNNER
    StandardOptions.DEFAULT_RUNNER = LOCAL_BEAM_RUNNER
    try:
        yield
    finally:
        StandardOptions.DEFAULT_RUNNER = saved
