"""Cloud Run functions entry point of the storage-event retraining trigger (`hftfx function-source` copies this
file to the source root, as main.py, beside the profile and the spec compiled from it).

Deploy with the entry point `on_object_finalized` and an Eventarc trigger on the data bucket
(google.cloud.storage.object.v1.finalized), or on its Pub/Sub notification topic. Importing this stays light:
no TensorFlow, TFX or Beam (the handler only decides and sends one PipelineJob request).
"""

import os
from pathlib import Path

import functions_framework

_HERE = Path(__file__).resolve().parent
os.environ.setdefault("HFTFX_CONFIG", str(_HERE / "profile.yaml"))
os.environ.setdefault("HFTFX_TEMPLATE", str(_HERE / "pipeline.yaml"))

from pipeline.retraining import events  # noqa: E402 (reads the two variables above when called)

on_object_finalized = functions_framework.cloud_event(events.on_object_finalized)
