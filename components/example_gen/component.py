"""The HF dataset ExampleGen component: no inputs, one `examples` output, a Beam executor."""

from __future__ import annotations

from tfx import types
from tfx.dsl.components.base import base_beam_component, executor_spec
from tfx.types import component_spec, standard_artifacts

from components.example_gen import executor
from components.example_gen.config import DatasetConfig, dump_dataset_config


class HFDatasetExampleGenSpec(component_spec.ComponentSpec):
    PARAMETERS = {  # noqa: RUF012 (TFX reads these class attributes)
        "dataset_config": component_spec.ExecutionParameter(type=str),
        # Override dataset_config's span and revision; runtime parameters of a compiled pipeline, so a
        # trigger or a user can name the data of one run without recompiling.
        "span": component_spec.ExecutionParameter(type=int, optional=True),
        "revision": component_spec.ExecutionParameter(type=str, optional=True),
        # Sizes and times of the files a local run reads: part of the cache key, so data files replaced
        # in place are read again rather than served from the cache.
        "input_fingerprint": component_spec.ExecutionParameter(type=str, optional=True),
    }
    INPUTS = {}  # noqa: RUF012
    OUTPUTS = {"examples": component_spec.ChannelParameter(type=standard_artifacts.Examples)}  # noqa: RUF012


class HFDatasetExampleGen(base_beam_component.BaseBeamComponent):
    """Reads a Hugging Face dataset into train/eval/test tf.Examples with int64 label ids."""

    SPEC_CLASS = HFDatasetExampleGenSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)

    def __init__(self, dataset: DatasetConfig, span=None, revision=None, input_fingerprint: str | None = None):
        super().__init__(
            spec=HFDatasetExampleGenSpec(
                dataset_config=dump_dataset_config(dataset),
                span=span,
                revision=revision,
                input_fingerprint=input_fingerprint or None,
                examples=types.Channel(type=standard_artifacts.Examples),
            )
        )
