"""Long texts and few examples: where a classifier's loss sits at the prior's for epochs, and the recipe for it.

On pages whose label hangs on one short passage (a critic's review between two other movies' plots, median 268
tokens, 2,397 train pages: `make bench-long`) MiniLM-L6's own recipe (1e-4, 5 epochs) never left the prior; 5e-5,
3e-5 and 2e-5 left it in the 4th epoch and 3e-5 did best (0.676, 0.645 and 0.629 test accuracy on three seeds,
against 0.519; 0.730, 0.676, 0.717 with the head on the tokens' mean, the default since). So where the texts are
long and the examples few, `auto` lowers the rate to PLATEAU_RATE (never raises it: base and large encoders already
train slower) and gives the epochs room to leave the plateau. The pages the model's own recipe passes on every seed
(the review after its movie's plot, median 152 tokens: 0.832, 0.808, 0.805; 0.805, 0.829, 0.795 on the mean) lie below
LONG_TEXT_TOKENS and keep it; at 3e-5 they lost 0.03 on one seed, within the test split's noise.
"""

from __future__ import annotations

import dataclasses

from models.training.lengths import LengthProfile

LONG_TEXT_TOKENS = 256  # median, special tokens included
FEW_EXAMPLES = 10_000  # train texts
PLATEAU_EPOCHS = 10  # the pages above left the prior in their 4th epoch: room for that and for learning after it
PLATEAU_RATE = 3e-5


@dataclasses.dataclass(frozen=True)
class TrainTexts:
    """What the recipe knows of the train split: its texts' median token length and how many there are (None:
    not counted yet, as on a preflight sample short of the whole dataset)."""

    median_tokens: int
    count: int | None

    @classmethod
    def of(cls, lengths: LengthProfile, count: int | None, width: int | None = None) -> TrainTexts:
        """The median of `lengths` as the model reads them (cut at `width`; a transformed split's already are)."""
        median = lengths.percentile(0.5)
        return cls(median if width is None else min(median, width), count)

    @property
    def plateau_prone(self) -> bool:
        return self.median_tokens >= LONG_TEXT_TOKENS and self.count is not None and self.count < FEW_EXAMPLES

    def describe(self) -> str:
        return f"long texts (median {self.median_tokens} tokens) and few examples ({self.count:,} train texts)"
