"""What every stage stands on: our encoders and in-graph tokenizers, the model's hub files, training's settings,
the hardware, and the export as served (one folder a kind; docs/development.md lists them)."""

from models import environment as _environment

_environment.configure()
