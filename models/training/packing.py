"""Packed batches (`training.packing`): a training batch's texts laid end to end in rows of the run's width, so the
step computes on almost no padding, with the same texts, labels and loss as the batch one text a row.

The encoders read packed rows as the texts apart (models/encoders/packed_rows.py: a block-diagonal attention mask,
positions from each text's start, the head on each text): the same numbers, so training differs from the unpacked
one only in the padding it no longer computes. The number of rows changes from batch to batch; the exported model
and validation stay one text a row.

Rows are filled first-fit decreasing (models/training/row_packing.py, the TensorFlow part: this module stays light
for the cloud profile's checks): within a few tokens of the fewest rows for a batch of short texts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Literal

from models.errors import UserError


class PackingError(UserError, ValueError):
    """training.packing: true where the run cannot pack; the message says why and what to set."""


Packing = Literal["auto"] | bool  # training.packing's values
PACKING_GAIN = 0.05  # auto packs where it removes at least this share of the trained tokens (padding)
# Packed rows attend whole: [rows, heads, T, T] scores, which the block-diagonal mask matches in size. Past this
# width attention runs in pieces (models/encoders/long_attention.py, QUERY_CHUNK) where a [T, T] mask would be the
# largest tensor of the step, and long texts fill their rows anyway.
WIDEST_PACKED = 512


@dataclasses.dataclass(frozen=True)
class PackingChoice:
    packed: bool
    reason: str
    padding_before: float  # share of the trained tokens, one text a row at the batch widths
    padding_after: float | None = None  # packed, where it was estimated

    @property
    def packed_padding(self) -> float | None:
        """The padding share of the packed rows, or None where the run does not pack (what time estimates cost)."""
        return self.padding_after if self.packed else None

    def describe(self) -> str:
        if not self.packed:
            return f"packing off ({self.reason}): {self.padding_before:.0%} of the trained tokens are padding"
        return (
            f"packing on ({self.reason}): {self.padding_before:.0%} of the trained tokens padding one text a row, "
            f"{self.padding_after:.0%} packed"
        )


def choose_packing(
    requested: Packing,
    lengths: Sequence[int],
    batch: int,
    width: int,
    padding_before: float,
    *,
    cannot: str | None = None,
) -> PackingChoice:
    """training.packing as set, or for `auto` on where the packed rows would carry at least PACKING_GAIN less padding
    than the batch widths do. `cannot`: why this run cannot pack (several replicas split each batch, windows, a
    width past WIDEST_PACKED); with `true`, a PackingError naming it and what to set."""
    if requested is False:
        return PackingChoice(False, "training.packing: false", padding_before)
    if requested is True and cannot is not None:
        raise PackingError(f"training.packing: true, but {cannot}; set training.packing to auto or false")
    if cannot is not None:
        return PackingChoice(False, cannot, padding_before)
    from models.training.row_packing import packed_padding  # TensorFlow: the cloud profile's checks import this module

    after = packed_padding(lengths, batch, width)
    if requested is True:
        return PackingChoice(True, "training.packing: true", padding_before, after)
    if padding_before - after >= PACKING_GAIN:
        return PackingChoice(True, f"auto: saves over {PACKING_GAIN:.0%} of the tokens", padding_before, after)
    return PackingChoice(False, f"auto: it would save under {PACKING_GAIN:.0%} of the tokens", padding_before, after)


def why_not_packed(*, replicas: int, windows: bool, width: int, fixed_shapes: bool = False) -> str | None:
    """Why a run cannot pack its batches, or None: the facts every caller (the preflight, the Trainer) has."""
    if fixed_shapes:
        return "a TPU compiles one program per shape, and packed batches vary in rows"
    if replicas > 1:
        return f"{replicas} replicas each take a piece of every batch, which packed rows cannot be cut into"
    if windows:
        return "model.long_texts: windows trains each window as an example already filling its row"
    if width > WIDEST_PACKED:
        return f"width {width} attends in pieces, where a packed row's mask would be the step's largest tensor"
    return None


def configured_packing(training, lengths: Sequence[int], width: int, padded_share: float, *, windowed: bool):
    """What the Trainer will decide of `training` (a TrainingConfig) on one machine's replicas: the preflight's
    expectation and the time estimates' (a cloud Trainer decides again where it runs: on a TPU it does not pack)."""
    cannot = why_not_packed(replicas=training.cpu_replicas, windows=windowed, width=width)
    return choose_packing(training.packing, lengths, training.batch_size, width, padded_share, cannot=cannot)
