"""The packing choice: from the texts' lengths in the order the Trainer draws them, and only where the run can pack."""

import numpy as np
import pytest

from models.training.packing import PACKING_GAIN, PackingError, choose_packing, why_not_packed
from models.training.row_packing import packed_padding


def test_packed_padding_is_estimated_on_shuffled_batches_not_the_sorted_profile():
    """Lengths around 26 at width 64: a batch of alike lengths fits two a row (19% padding); shuffled, short
    texts fill the gaps (a few percent)."""
    lengths = sorted(np.random.default_rng(0).integers(10, 45, 4000).tolist())
    assert packed_padding(lengths, 32, 64) < 0.08


def test_auto_packs_where_it_saves_enough_and_says_both_shares():
    short = np.random.default_rng(1).integers(8, 40, 2000).tolist()
    on = choose_packing("auto", short, 32, 64, padding_before=0.22)
    assert on.packed and on.padding_after < 0.22 - PACKING_GAIN
    assert "22% of the trained tokens padding one text a row" in on.describe()
    full = [64] * 500  # every text fills its row already
    assert not choose_packing("auto", full, 32, 64, padding_before=0.0).packed
    assert not choose_packing(False, short, 32, 64, padding_before=0.22).packed
    assert choose_packing(True, full, 32, 64, padding_before=0.0).packed


@pytest.mark.parametrize(
    ("facts", "named"),
    [
        ({"replicas": 2, "windows": False, "width": 64}, "replicas"),
        ({"replicas": 1, "windows": True, "width": 64}, "windows"),
        ({"replicas": 1, "windows": False, "width": 1024}, "pieces"),
        ({"replicas": 1, "windows": False, "width": 64, "fixed_shapes": True}, "TPU"),
    ],
)
def test_a_run_that_cannot_pack_does_not_and_says_why(facts, named):
    cannot = why_not_packed(**facts)
    assert named in cannot
    choice = choose_packing("auto", [10] * 100, 32, 64, padding_before=0.5, cannot=cannot)
    assert not choice.packed and named in choice.describe()
    assert why_not_packed(replicas=1, windows=False, width=512) is None


def test_true_where_the_run_cannot_pack_is_an_error_naming_why_and_the_fix():
    with pytest.raises(PackingError, match=r"but a TPU compiles one program per shape.*set training\.packing to auto"):
        choose_packing(
            True,
            [10] * 100,
            32,
            64,
            padding_before=0.5,
            cannot=why_not_packed(replicas=1, windows=False, width=64, fixed_shapes=True),
        )
