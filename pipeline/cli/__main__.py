"""`python -m pipeline.cli`: the `hftfx` command."""

import sys

from pipeline.cli import run_quietly

sys.exit(run_quietly())
