"""The sequence width a run trains and serves at, and the narrower widths its batches are cut to, chosen from the
token lengths of its own texts.

A fixed default fits one dataset: 64 tokens hold 99.9% of the Rotten Tomatoes snippets and the first tenth of a
speech. With `model.max_seq_length: auto` the preflight tokenizes a sample of the training texts with the model's
own tokenizer and takes the smallest multiple of WIDTH_MULTIPLE that holds COVERED_SHARE of them whole (special
tokens included), capped at the model's position limit; a number in the config still wins. Multiples of 16 keep
the matmuls aligned and the set of shapes small (XLA and TPUs compile one program per shape).

With `training.batch_widths: auto` the same lengths choose up to MAX_LENGTH_BUCKETS narrower widths: the set that
pads the fewest tokens, as the Trainer groups texts of similar length and cuts each batch to its bucket's width.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BeforeValidator

from models.config_section import AUTO, auto_or_number
from models.tokenizers.windows import Windows

SHORTEST_WIDTH = 8  # a few special tokens and a word or two
_WIDTH = f"a number of tokens (at least {SHORTEST_WIDTH})"
SeqLength = Annotated[
    int | Literal["auto"], BeforeValidator(functools.partial(auto_or_number, low=SHORTEST_WIDTH, what=_WIDTH))
]
WindowCount = Annotated[
    int | Literal["auto"],
    BeforeValidator(functools.partial(auto_or_number, low=1, what="a number of windows (at least 1)")),
]
COVERED_SHARE = 0.99  # of the sampled texts held whole: the long tail alone does not set the width
WIDTH_MULTIPLE = 16
MOST_TEXTS_CUT = 0.5  # a width that cuts more than this share of the texts is worth a warning before training
LENGTH_SAMPLE = 5_000  # texts tokenized for a profile: p99 of 5,000 lies within a few tokens of the whole's
MAX_LENGTH_BUCKETS = 3  # widths below max_seq_length: at most four static shapes, each compiled once on XLA/TPU
BUCKET_GAIN = 0.02  # fewer widths win when they pad at most this share more tokens than the best set


def _widths(value: object) -> object:
    """`auto`, or increasing whole numbers of tokens of at least SHORTEST_WIDTH (one number: a list of one)."""
    if value == AUTO:
        return value
    values = [value] if isinstance(value, str | int) else value
    try:
        widths = tuple(int(str(v)) for v in values)
    except (TypeError, ValueError):
        raise ValueError(f"should be auto or increasing numbers of tokens (at least {SHORTEST_WIDTH})") from None
    if list(widths) != sorted(set(widths)) or any(w < SHORTEST_WIDTH for w in widths):
        raise ValueError(f"should be auto or increasing numbers of tokens (at least {SHORTEST_WIDTH})")
    return widths


BucketWidths = Annotated[tuple[int, ...] | Literal["auto"], BeforeValidator(_widths)]


@dataclasses.dataclass(frozen=True)
class LengthProfile:
    """Token lengths of sampled texts (pairs: both texts), special tokens included, sorted."""

    lengths: tuple[int, ...]
    special_tokens: int = 2  # of each length, the model's own ([CLS] and [SEP] for BERT)

    @classmethod
    def of(cls, lengths: Sequence[int], special_tokens: int = 2) -> LengthProfile:
        return cls(tuple(sorted(int(n) for n in lengths)), special_tokens)

    def windowed(self, windows: Windows) -> LengthProfile:
        """The lengths of the windows the texts are split into (`model.long_texts: windows`): what the Trainer
        trains on, one example per window."""
        text_lengths = (n - self.special_tokens for n in self.lengths)
        kept = (k for n in text_lengths for k in windows.split(n))
        return LengthProfile.of([k + self.special_tokens for k in kept], self.special_tokens)

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


@dataclasses.dataclass(frozen=True)
class BucketChoice:
    """The widths below max_seq_length a batch is cut to, and the share of the trained tokens that is padding."""

    buckets: tuple[int, ...]
    reason: str
    padded_share: float  # of the tokens the Trainer computes on, with these buckets
    padded_share_one_width: float  # every batch at max_seq_length

    def describe(self) -> str:
        widths = ", ".join(map(str, self.buckets)) or "none"
        return (
            f"batch widths {widths} ({self.reason}): {self.padded_share:.0%} of the trained tokens are padding "
            f"({self.padded_share_one_width:.0%} at one width)"
        )


def bucket_edges(width: int, buckets: Sequence[int]) -> list[int]:
    """The widths a batch can be cut to, narrowest first: the buckets below `width` (a wider one is never used),
    then `width` itself. The Trainer, the epoch estimate and the bucket choice all cut by this."""
    return sorted({*(b for b in buckets if b < width), width})


def padded_tokens(profile: LengthProfile, width: int, buckets: Sequence[int]) -> int:
    """Tokens the Trainer computes on for the profile's texts: each at the narrowest of the bucket widths and
    `width` that holds it (texts longer than `width` are cut to it)."""
    total, below = 0, 0
    for edge in bucket_edges(width, buckets):
        held = bisect.bisect_right(profile.lengths, edge)
        total += edge * (held - below)
        below = held
    return total + width * (len(profile.lengths) - below)


def padding_share(profile: LengthProfile, width: int, buckets: Sequence[int]) -> float:
    padded = padded_tokens(profile, width, buckets)
    return 1 - sum(min(n, width) for n in profile.lengths) / padded if padded else 0.0


def choose_buckets(profile: LengthProfile, width: int, requested: BucketWidths) -> BucketChoice:
    """The config's widths, or for `auto` the set of at most MAX_LENGTH_BUCKETS multiples of WIDTH_MULTIPLE below
    `width` that pads the fewest tokens, or the fewest widths within BUCKET_GAIN of that (one shape fewer to compile).
    Padded tokens, not FLOPs: attention's share is small at these widths, and the count is what users read."""
    one_width = padding_share(profile, width, ())
    if requested != AUTO:
        buckets = tuple(bucket_edges(width, requested)[:-1])
        return BucketChoice(buckets, "set in the config", padding_share(profile, width, buckets), one_width)
    candidates = range(WIDTH_MULTIPLE, width, WIDTH_MULTIPLE)
    best = [
        min((padded_tokens(profile, width, s), s) for s in itertools.combinations(candidates, count))
        for count in range(min(MAX_LENGTH_BUCKETS, len(candidates)) + 1)
    ]
    fewest = next(s for tokens, s in best if tokens <= best[-1][0] * (1 + BUCKET_GAIN))
    reason = f"auto: the fewest padded tokens with at most {MAX_LENGTH_BUCKETS} widths below {width}"
    return BucketChoice(fewest, reason, padding_share(profile, width, fewest), one_width)


MAX_AUTO_WINDOWS = 16  # windows per document auto allows: 16 x 512 tokens hold ~5,000 words at half overlap


@dataclasses.dataclass(frozen=True)
class WindowChoice:
    """How a run splits its texts into windows, and what that does to the sampled ones."""

    windows: Windows
    reason: str
    profile: LengthProfile  # of the texts, whole

    @property
    def trained(self) -> LengthProfile:
        """The windows' lengths: the examples the Trainer trains on."""
        return self.profile.windowed(self.windows)

    @property
    def cut_share(self) -> float:
        """The share of texts longer than their windows hold."""
        special, count = self.profile.special_tokens, self.windows.count
        cut = sum(self.windows.needed(n - special) > count for n in self.profile.lengths)
        return cut / len(self.profile.lengths) if self.profile.lengths else 0.0

    @property
    def cuts_most(self) -> bool:
        return self.cut_share > MOST_TEXTS_CUT

    def describe(self) -> str:
        per_text = len(self.trained.lengths) / max(1, len(self.profile.lengths))
        return (
            f"windows: at most {self.windows.count} per text ({self.reason}), {self.windows.budget} text tokens each, "
            f"{self.windows.step} apart: {per_text:.1f} per text on average, {self.cut_share:.1%} of texts cut"
        )


def choose_windows(profile: LengthProfile, width: int, stride: float, requested: int | str) -> WindowChoice:
    """The config's windows per text, or for `auto` as many as hold COVERED_SHARE of the texts whole, at most
    MAX_AUTO_WINDOWS."""
    if requested != AUTO:
        return WindowChoice(
            Windows.over(width, profile.special_tokens, stride, int(requested)), "set in the config", profile
        )
    widest = Windows.over(width, profile.special_tokens, stride, MAX_AUTO_WINDOWS)
    needed = widest.needed(profile.percentile(COVERED_SHARE) - profile.special_tokens)
    if needed > MAX_AUTO_WINDOWS:
        reason = f"auto: at most {MAX_AUTO_WINDOWS}; {COVERED_SHARE:.0%} of the texts need {needed}"
        return WindowChoice(widest, reason, profile)
    chosen = dataclasses.replace(widest, count=needed)
    return WindowChoice(chosen, f"auto: {COVERED_SHARE:.0%} of the texts whole", profile)


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


UNKNOWN_POSITION_LIMIT = 8_192  # the widest a model without a stated position limit is counted for


def counted_tokens(position_limit: int | None) -> int:
    """The most tokens of one text any length choice looks at: auto's most windows at the widest width the model
    takes. A text is counted up to it (past it, no width, window count or share cut changes), so a 100 MB text in a
    sample costs what its first few MB do."""
    return MAX_AUTO_WINDOWS * (position_limit or UNKNOWN_POSITION_LIMIT)


def token_lengths(
    model_dir: Path, rows: Sequence, position_limit: int | None, max_texts: int = LENGTH_SAMPLE
) -> LengthProfile:
    """The lengths of `rows` (anything with .text and .text_pair) in the model's tokens, special tokens included
    (pairs: both texts and their separators), as the Transform counts them: the in-graph tokenizer, which
    reproduces the model's own id for id; exact up to counted_tokens(position_limit), past it at least that."""
    import numpy as np
    import tensorflow as tf

    from models.names import TOKEN_COUNT
    from models.tokenizers.tokenizer import InGraphTokenizer, tokenizer_spec

    rows = list(rows[:max_texts])
    spec = tokenizer_spec(model_dir)
    pair = bool(rows) and rows[0].text_pair is not None
    tokenizer = InGraphTokenizer(spec, WIDTH_MULTIPLE, counted_tokens=counted_tokens(position_limit))
    counts = [np.zeros([0], np.int64)]
    for start in range(0, len(rows), 1024):
        chunk = rows[start : start + 1024]
        pairs = tf.constant([r.text_pair for r in chunk]) if pair else None
        counts.append(tokenizer(tf.constant([r.text for r in chunk]), pairs)[TOKEN_COUNT].numpy())
    special = spec.layout.special_count(pair)
    return LengthProfile.of((np.concatenate(counts) + special).tolist(), special)
