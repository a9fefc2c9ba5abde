"""Chance: the loss of a model that knows only how often each label occurs (the prior), and whether a run left it.

A classifier's cross-entropy starts at the prior's (0.693 for two balanced labels) and may sit there for epochs
while the model looks for where the signal is (long pages whose label hangs on one short passage); early stopping on
that plateau stops at chance. A run whose loss never clearly leaves the prior learned nothing, and says so; one
whose training loss left it while the eval loss did not learned what does not carry over, and says that.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from models.training.long_and_few import PLATEAU_EPOCHS, TrainTexts

# "Clearly below the prior": the loss under (1 - CHANCE_MARGIN) x the prior's. On the plateau the training loss moved
# 0.685 -> 0.683 -> 0.674 against 0.693 (3% under) before the model found the passage and fell to 0.58.
CHANCE_MARGIN = 0.05


def prior_loss(
    rows: int,
    tagged: Sequence[int],
    multi_label: bool,
    weights: Mapping[int, float] | None = None,
    label_smoothing: float = 0.0,
) -> float:
    """The cross-entropy of always answering the label frequencies: their entropy (natural log, as Keras' loss).
    Single label with class weights (Keras' class_weight scales each row's loss): the weighted rows' best constant
    answer. Multi-label: the mean over labels of each one's binary entropy, as the mean binary cross-entropy.
    `label_smoothing` s: the targets the loss is measured against are smoothed as Keras smooths them (a share s spread
    over the K labels; each multi-label target pulled toward 0.5), so the best constant answer is the smoothed
    frequencies and its loss their entropy: above the plain prior's wherever the labels are not balanced."""
    if rows <= 0:
        return math.nan
    if multi_label:
        smoothed_shares = [count / rows * (1 - label_smoothing) + label_smoothing / 2 for count in tagged]
        return sum(_binary_entropy(share) for share in smoothed_shares) / max(len(tagged), 1)
    mass = [count * (weights or {}).get(label, 1.0) for label, count in enumerate(tagged)]
    total = sum(mass)
    smoothed = [(1 - label_smoothing) * m + label_smoothing * total / len(mass) for m in mass]
    return -sum(m / rows * math.log(m / total) for m in smoothed if m > 0)


def _binary_entropy(p: float) -> float:
    return 0.0 if p in (0.0, 1.0) else -(p * math.log(p) + (1 - p) * math.log(1 - p))


def plateau_risk(texts: TrainTexts, epochs: int | None = None) -> str | None:
    """What `--check` warns of when texts are long and examples few: the label may hang on a short passage the model
    takes epochs to find, the loss meanwhile at the prior's. `epochs`: the run's most (None: not known yet); more
    are asked for only where it has fewer than PLATEAU_EPOCHS. The rate is not: auto chooses the plateau's for such
    texts (long_and_few.py), and a rate set in the config is the user's."""
    if not texts.plateau_prone:
        return None
    if epochs is not None and epochs >= PLATEAU_EPOCHS:
        room = f"this run's {epochs} epochs leave it room"
    else:
        room = f"give it epochs (--epochs {PLATEAU_EPOCHS}" + (f": this run has {epochs} at most)" if epochs else ")")
    return (
        f"{texts.describe()}: the loss may sit at the label frequencies' for epochs before the model finds where the "
        f"label is decided. Early stopping waits while it does, and the summary says if the run never left chance; "
        f"{room}"
    )


def left_chance(loss: float, prior: float) -> bool:
    return not math.isfinite(prior) or loss < prior * (1 - CHANCE_MARGIN)


@dataclasses.dataclass(frozen=True)
class ChanceVerdict:
    """Whether the exported model left chance, and what to try when it did not."""

    left: bool
    loss: float
    prior: float
    which: str  # the loss judged: val_loss (the eval split) or loss (the train split, where there is no eval)
    # the best training loss where it left the train split's prior while val_loss did not: the model fit the training
    # texts by what does not carry over (review-between pages at 3e-5: train 0.23, val 0.68), so more epochs is no try
    fit_train: float | None = None

    def describe(
        self, truncated_share: float | None = None, long_texts: str = "truncate", learning_rate: float | None = None
    ) -> str:
        """`truncated_share` of the train texts were cut under the `long_texts` policy: the try for them is the
        policies not run (under windows: more windows). `learning_rate`: the run's peak rate, of which the rate to
        try is a third."""
        if self.left:
            return f"left chance: {self.which} {self.loss:.3f} against the prior's {self.prior:.3f}"
        judged = f"{self.which} {self.loss:.3f} against the prior's {self.prior:.3f}"
        cut = _for_cut_texts(truncated_share, long_texts)
        if self.fit_train is not None:
            return (
                f"the model did not leave chance on held-out texts ({judged}) though it fit the training texts (loss "
                f"{self.fit_train:.3f}): what it learned does not carry over; try, in this order: "
                f"{_lower_rate(learning_rate)}, more training examples{cut}"
            )
        return (
            f"the model did not leave chance ({judged}); try, in this order: more epochs (--epochs), "
            f"{_lower_rate(learning_rate)}{cut}"
        )


# A run stuck at the prior is more often helped by a lower rate than a higher one: failed fine-tuning runs are
# optimisation failures that smaller steps over more iterations fix (Mosbach et al. 2021), and on pages whose label
# hangs on one short review MiniLM never left chance at 1e-4 while 5e-5 and 3e-5 did (make bench-long).
LOWER_RATE_SHARE = 1 / 3


def _lower_rate(learning_rate: float | None) -> str:
    if not learning_rate:
        return "a lower learning rate (--learning-rate)"
    lower = float(f"{learning_rate * LOWER_RATE_SHARE:.0e}")
    return f"a lower learning rate (--learning-rate {lower:g}, about a third of this run's {learning_rate:g})"


def _for_cut_texts(truncated_share: float | None, long_texts: str) -> str:
    """The last try where texts were cut: the policies not run, or under windows more windows."""
    if not truncated_share:
        return ""
    cut = f"{truncated_share:.0%} of the train texts were cut"
    if long_texts == "windows":
        return f"; more windows (model.max_windows): {cut}"
    others = " or ".join(policy for policy in ("windows", "head_tail") if policy != long_texts)
    return f"; --long-texts {others}: {cut}"


def verdict(history: Mapping[str, Sequence[float]], train_prior: float, eval_prior: float) -> ChanceVerdict:
    """From Keras' history: the eval split's best val_loss against its prior (and, where it stayed there, whether the
    training loss left its own), else the train loss's best."""
    trained = min(history.get("loss") or [math.inf])
    if history.get("val_loss"):
        found = _judged(min(history["val_loss"]), eval_prior, "val_loss")
        if not found.left and math.isfinite(trained) and left_chance(trained, train_prior):
            return dataclasses.replace(found, fit_train=trained)
        return found
    return _judged(trained, train_prior, "loss")


def _judged(loss: float, prior: float, which: str) -> ChanceVerdict:
    return ChanceVerdict(left_chance(loss, prior), loss, prior, which)
