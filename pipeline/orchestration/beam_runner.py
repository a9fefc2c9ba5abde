"""Keeps Beam on the runner the project is tested with when a run passes it no `--runner`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from apache_beam.options.pipeline_options import StandardOptions

from pipeline.configs import LOCAL_BEAM_RUNNER


@contextlib.contextmanager
def local_beam_runner() -> Iterator[None]:
    """Makes LOCAL_BEAM_RUNNER Beam's default runner while the block runs.

    Set as Beam's default rather than passed as `--runner`: given any Beam argument, TFX 1.21 builds an sdist of
    itself for every component (see PipelineConfig.beam_args). An explicit `--runner` still wins.
    """
    saved = StandardOptions.DEFAULT_RUNNER
    StandardOptions.DEFAULT_RUNNER = LOCAL_BEAM_RUNNER
    try:
        yield
    finally:
        StandardOptions.DEFAULT_RUNNER = saved
