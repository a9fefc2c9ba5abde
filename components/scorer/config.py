"""The `scoring` config section: unlabeled rows the pipeline scores with each blessed model (its BatchScorer)."""

from __future__ import annotations

from pydantic import Field

from components.scorer.records import DEFAULT_BATCH_SIZE
from components.scorer.rows import BatchInputError, input_columns, input_kind, missing_columns
from models.config_section import ConfigSection, Texts


class ScoringConfig(ConfigSection):
    """Unlabeled rows the pipeline scores with each blessed model (its BatchScorer step); empty input: none."""

    input: str = Field(
        "",
        description="a file, glob or save_to_disk folder (Dataset or DatasetDict), in a format training reads (.jsonl "
        ".json .csv .tsv .parquet .arrow .txt, also compressed); gs:// in the cloud",
    )
    text_column: str = Field("text", min_length=1, description="column holding the text to score")
    text_pair_column: str = Field("", description="column holding the second text, for sentence-pair models")
    id_columns: Texts = Field((), description="columns copied to the output; empty: every column but the texts")
    batch_size: int = Field(DEFAULT_BATCH_SIZE, ge=1, description="rows per model call")

    def check_input(self, pair_model: bool) -> None:
        """What is knowable before training: the input exists, in a format read here, with the text columns."""
        if not self.input:
            return
        if pair_model != bool(self.text_pair_column):
            need = "set scoring.text_pair_column" if pair_model else "leave scoring.text_pair_column empty"
            raise BatchInputError(f"the model will read {'text pairs' if pair_model else 'one text'}: {need}")
        columns = input_columns(self.input, input_kind(self.input))
        missing = missing_columns(columns, {self.text_column, self.text_pair_column})
        if missing:
            raise BatchInputError(f"scoring.input {self.input} has no column {missing}; its columns: {columns}")
