"""Whether the epoch early stopping exported on val_loss is also the eval split's most accurate one.

val_loss can rise while accuracy still rises: the model grows confident on the examples it gets wrong (bench-long's
review-between pages at 3e-5, seed 42: val_loss best at epoch 5 with val_accuracy 0.667, then 0.70 to 0.82 while
val_accuracy reached 0.737 at epoch 7; watching val_accuracy exported epoch 7, test accuracy 0.717 against epoch 5's
0.676). The user who is judged on accuracy is told which epoch that was, where the difference is beyond the eval
split's noise, and how to export it.
"""

from __future__ import annotations

from collections.abc import Mapping

from models.training.eval_noise import loss_noise


def more_accurate_epoch(
    val_accuracy: Mapping[int, float], exported: int, examples: int, val_loss: Mapping[int, float] | None = None
) -> str:
    """A sentence when an epoch other than the `exported` one was more accurate on the eval split by more than one
    standard error of the exported epoch's accuracy; '' otherwise. Epochs 0-based, as Keras' history numbers them
    (a resumed run's holds only the epochs it ran). `val_loss` by epoch: where it was higher at the more accurate
    epoch, the sentence says why early stopping passed it by."""
    if exported not in val_accuracy:
        return ""
    best = max(sorted(val_accuracy), key=lambda epoch: val_accuracy[epoch])  # the first of ties
    chosen, top = val_accuracy[exported], val_accuracy[best]
    noise = loss_noise(chosen, chosen, examples)  # an accuracy is a mean of 0/1 hits, each its own square
    if best == exported or top - chosen <= noise:
        return ""
    losses = val_loss or {}
    why = ""
    if best in losses and exported in losses and losses[best] > losses[exported]:
        why = (
            f"; its val_loss was higher ({losses[best]:.4f} against {losses[exported]:.4f}): the model grew "
            "confident on texts it got wrong"
        )
    return (
        f"val_accuracy was best at epoch {best + 1} ({top:.3f} against the exported epoch {exported + 1}'s "
        f"{chosen:.3f}, more than the eval split's noise: {noise:.3f} over {examples:,} examples){why}. To export "
        "the most accurate epoch instead: --set training.early_stopping.metric=val_accuracy"
    )
