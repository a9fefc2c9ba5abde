"""What the Transform reads: the model section whole, the task kind and the length slices' edges, as one settings
object the DAG builds and preprocessing_fn parses (the Transform's only channel from the config)."""

from __future__ import annotations

from pydantic import Field

from models.config_section import ConfigSection, build_section
from models.training.config import ModelConfig


class TransformSettings(ConfigSection):
    """The Transform's part of the config. Only what it reads: another section's change must not re-run it."""

    model: ModelConfig = Field(description="the pretrained model whose tokenizer runs in-graph, and its length policy")
    multi_label: bool = Field(False, description="labels come as a 0/1 vector over the label set")
    length_slice_edges: tuple[int, ...] = Field(description="evaluation.length_slice_edges: the length slices")

    def to_custom_config(self) -> dict:
        """The JSON-able dict the Transform component carries to preprocessing_fn."""
        return self.model_dump(mode="json")

    @classmethod
    def from_custom_config(cls, custom_config: dict) -> TransformSettings:
        return build_section(cls, custom_config, "transform")
