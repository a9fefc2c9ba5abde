"""The TFX pipeline: typed config, pipeline definition, runners and the `hftfx` CLI."""

from models import environment as _environment

_environment.configure()
