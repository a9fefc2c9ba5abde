"""The Hugging Face model: loading, in-graph tokenization and serving signatures."""

from models import environment as _environment

_environment.configure()
