"""How a text longer than the model's window is split into overlapping windows (`model.long_texts: windows`).

The in-graph tokenizer cuts texts this way and the preflight counts and costs the windows by the same numbers.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Windows:
    """Overlapping windows over a document's tokens (`model.long_texts: windows`): each holds `budget` text
    tokens (the width less the special tokens), consecutive ones start `step` tokens apart, at most `count`."""

    budget: int
    step: int
    count: int

    @classmethod
    def over(cls, width: int, special_tokens: int, stride: float, count: int) -> Windows:
        budget = width - special_tokens
        return cls(budget, max(1, int(budget * stride)), count)

    def needed(self, text_tokens: int) -> int:
        """Windows that cover `text_tokens` whole: one, then one per `step` past the first window."""
        return 1 + max(0, -(-(text_tokens - self.budget) // self.step))

    def split(self, text_tokens: int) -> list[int]:
        """The text tokens each window of a document holds (the last one may be shorter)."""
        return [min(self.budget, text_tokens - k * self.step) for k in range(min(self.count, self.needed(text_tokens)))]
