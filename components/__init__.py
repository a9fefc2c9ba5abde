"""Custom TFX components and the module code the standard components run."""

from pipeline import environment as _environment

_environment.configure()
