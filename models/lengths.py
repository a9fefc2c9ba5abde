"""The sequence width a run trains and serves at, chosen from the token lengths of its own texts.

A fixed default fits one dataset: 64 tokens hold 99.9% of the Rotten Tomatoes snippets and the first tenth of a
speech. With `model.max_seq_length: auto` the preflight tokenizes a sample of the training texts with the model's
own tokenizer and takes the smallest multiple of WIDTH_MULTIPLE that holds COVERED_SHARE of them whole (special
tokens included), capped at the model's position limit; a number in the config still wins. Multiples of 16 keep
the matmuls aligned and the set of shapes small (XLA and TPUs compile one program per shape).
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BeforeValidator

AUTO = "auto"
SHORTEST_WIDTH = 8  # a few special tokens and a word or two


def _seq_length(value: object) -> object:
    """`auto`, or a whole number of tokens of at least SHORTEST_WIDTH (as text too: --set passes strings)."""
    if value == AUTO:
        return value
    try:
        width = int(str(value))
    except ValueError:
        raise ValueError(f"should be auto or a number of tokens (at least {SHORTEST_WIDTH})") from None
    if width < SHORTEST_WIDTH:
        raise ValueError(f"should be auto or at least {SHORTEST_WIDTH} tokens")
    return width


# One validator for both forms, so a bad value gets one message instead of one per alternative.
SeqLength = Annotated[int | Literal["auto"], BeforeValidator(_seq_length)]
COVERED_SHARE = 0.99  # of the sampled texts held whole: the long tail alone does not set the width
WIDTH_MULTIPLE = 16
MOST_TEXTS_CUT = 0.5  # a width that cuts more than this share of the texts is worth a warning before training
LENGTH_SAMPLE = 5_000  # texts tokenized for a profile: p99 of 5,000 lies within a few tokens of the whole's


@dataclasses.dataclass(frozen=True)
class LengthProfile:
    """Token lengths of sampled texts (pairs: both texts), special tokens included, sorted."""

    lengths: tuple[int, ...]

    @classmethod
    def of(cls, lengths: Sequence[int]) -> LengthProfile:
        return cls(tuple(sorted(int(n) for n in lengths)))

    def percentile(self, share: float) -> int:
        """The smallest length at least `share` of the texts do not exceed (nearest rank)."""
        if not self.lengths:
            return 0
        return self.lengths[max(0, math.ceil(share * len(self.lengths)) - 1)]

    def cut_share(self, width: int) -> float:
        """The share of texts longer than `width` tokens: what truncation at that width cuts."""
        return (
            (len(self.lengths) - bisect.bisect_right(self.lengths, width)) / len(self.lengths) if self.lengths else 0.0
        )

    def describe(self) -> str:
        return (
            f"{len(self.lengths):,} sampled texts: median {self.percentile(0.5)}, p90 {self.percentile(0.9)}, "
            f"p99 {self.percentile(0.99)}, max {self.lengths[-1] if self.lengths else 0} tokens"
        )


@dataclasses.dataclass(frozen=True)
class WidthChoice:
    width: int
    reason: str
    profile: LengthProfile
    at_position_limit: bool = False  # auto wanted more than the model's positions hold

    @property
    def cut_share(self) -> float:
        return self.profile.cut_share(self.width)

    @property
    def cuts_most(self) -> bool:
        return self.cut_share > MOST_TEXTS_CUT

    def describe(self) -> str:
        return (
            f"lengths: {self.profile.describe()}; max_seq_length {self.width} ({self.reason}): "
            f"{self.cut_share:.1%} of texts cut"
        )


def round_up(length: int, multiple: int = WIDTH_MULTIPLE) -> int:
    return max(multiple, -(-length // multiple) * multiple)


def choose_width(profile: LengthProfile, requested: SeqLength, position_limit: int | None) -> WidthChoice:
    """The width to train and serve at: the config's number, or for `auto` the smallest multiple of
    WIDTH_MULTIPLE holding COVERED_SHARE of the sampled texts, capped at the model's position limit."""
    if requested != AUTO:
        return WidthChoice(int(requested), "set in the config", profile)
    wanted = round_up(profile.percentile(COVERED_SHARE))
    if position_limit is not None and wanted > position_limit:
        reason = f"auto: the model's position limit; {COVERED_SHARE:.0%} of the texts need {wanted}"
        return WidthChoice(position_limit, reason, profile, at_position_limit=True)
    reason = f"auto: the smallest multiple of {WIDTH_MULTIPLE} holding {COVERED_SHARE:.0%} of the texts whole"
    return WidthChoice(wanted, reason, profile)


def token_lengths(model_dir: Path, rows: Sequence, max_texts: int = LENGTH_SAMPLE) -> LengthProfile:
    """The lengths of `rows` (anything with .text and .text_pair) in the model's tokens, special tokens included
    (pairs: both texts and their separators), as the Transform counts them: the in-graph tokenizer, which
    reproduces the model's own id for id."""
    import numpy as np
    import tensorflow as tf

    from models.contract import TOKEN_COUNT
    from models.tokenizer import InGraphTokenizer, tokenizer_spec

    rows = list(rows[:max_texts])
    spec = tokenizer_spec(model_dir)
    pair = bool(rows) and rows[0].text_pair is not None
    tokenizer = InGraphTokenizer(spec, WIDTH_MULTIPLE)
    counts = [np.zeros([0], np.int64)]
    for start in range(0, len(rows), 1024):
        chunk = rows[start : start + 1024]
        pairs = tf.constant([r.text_pair for r in chunk]) if pair else None
        counts.append(tokenizer(tf.constant([r.text for r in chunk]), pairs)[TOKEN_COUNT].numpy())
    return LengthProfile.of((np.concatenate(counts) + spec.layout.special_count(pair)).tolist())
