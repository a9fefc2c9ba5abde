"""Custom TFX components and the module code the standard components run."""

from models import environment as _environment

_environment.configure()
