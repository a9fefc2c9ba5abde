"""Truncation, token counts and unknown tokens of a split, from TFDV's statistics of the transformed examples.

Read by the run report and by the model card's limitations.
"""

from __future__ import annotations

import dataclasses

from models.names import TOKEN_COUNT, TRUNCATED, UNKNOWN_TOKENS


@dataclasses.dataclass(frozen=True)
class TokenizationFigures:
    examples: int
    truncated_share: float  # texts cut to model.max_seq_length
    mean_tokens: float
    max_tokens: float
    unknown_share: float  # texts holding at least one unknown token
    unknown_per_text: float

    def describe(self) -> str:
        return (
            f"{self.truncated_share:.1%} of texts truncated; tokens per text mean {self.mean_tokens:.1f}, "
            f"max {self.max_tokens:.0f}; {self.unknown_share:.1%} of texts hold [UNK] tokens "
            f"({self.unknown_per_text:.2f} per text)"
        )


def tokenization_figures(feature_stats_path: str) -> TokenizationFigures:
    """The figures of one split's FeatureStats file (TFDV's own loader reads it)."""
    import tensorflow_data_validation as tfdv

    dataset = tfdv.load_stats_binary(feature_stats_path).datasets[0]
    stats = {f.path.step[0]: f.num_stats for f in dataset.features}
    truncated, tokens, unknown = stats[TRUNCATED], stats[TOKEN_COUNT], stats[UNKNOWN_TOKENS]
    return TokenizationFigures(
        examples=dataset.num_examples,
        truncated_share=truncated.mean,
        mean_tokens=tokens.mean,
        max_tokens=tokens.max,
        unknown_share=1 - unknown.num_zeros / dataset.num_examples if dataset.num_examples else 0.0,
        unknown_per_text=unknown.mean,
    )
