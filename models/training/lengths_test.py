"""The width auto chooses: from the texts' own lengths, a multiple of 16, within the model's positions."""

from types import SimpleNamespace

import pytest

from models.training.lengths import (
    AUTO,
    LengthProfile,
    choose_buckets,
    choose_width,
    counted_tokens,
    padded_tokens,
    padding_share,
    round_up,
    token_lengths,
)


def test_auto_takes_the_smallest_multiple_of_16_that_holds_99_percent_of_the_texts():
    profile = LengthProfile.of([20] * 95 + [50] * 4 + [300])  # one outlier does not set the width
    choice = choose_width(profile, AUTO, position_limit=512)
    assert choice.width == 64 and choice.cut_share == pytest.approx(0.01) and not choice.cuts_most
    assert "99%" in choice.reason and "median 20, p90 20, p99 50, max 300 tokens" in choice.describe()


def test_a_number_in_the_config_wins_and_long_texts_stop_at_the_position_limit():
    speeches = LengthProfile.of(range(300, 4000, 10))
    assert (
        choose_width(speeches, 128, 512).width == 128 and choose_width(speeches, 128, 512).reason == "set in the config"
    )
    capped = choose_width(speeches, AUTO, position_limit=512)
    assert (capped.width, capped.at_position_limit) == (512, True)
    assert capped.cuts_most and "position limit" in capped.reason


@pytest.mark.parametrize(("length", "width"), [(1, 16), (16, 16), (17, 32), (55, 64), (129, 144)])
def test_widths_are_multiples_of_16(length, width):
    assert round_up(length) == width


def test_lengths_are_counted_in_the_models_tokens_with_its_special_tokens(packaged_model_dir):
    from transformers import AutoTokenizer

    texts = ["a gem.", "dull, flat and far too long for what it has to say", "", "x " * 200]
    rows = [SimpleNamespace(text=t, text_pair=None) for t in texts]
    want = [len(ids) for ids in AutoTokenizer.from_pretrained(packaged_model_dir)(texts)["input_ids"]]
    assert token_lengths(packaged_model_dir, rows, 512).lengths == tuple(sorted(want))
    pairs = [SimpleNamespace(text=t, text_pair="a plot.") for t in texts]
    want = [len(ids) for ids in AutoTokenizer.from_pretrained(packaged_model_dir)(texts, ["a plot."] * 4)["input_ids"]]
    assert token_lengths(packaged_model_dir, pairs, 512).lengths == tuple(sorted(want))

def test_a_text_past_what_any_choice_looks_at_is_counted_only_that_far(packaged_model_dir):
    """A 10 MB text in the sample: counted as at least counted_tokens (every choice treats it the same), without
    tokenizing all of it (its first characters, cut as the budget cuts)."""
    rows = [SimpleNamespace(text="good " * 2_000_000, text_pair=None), SimpleNamespace(text="a gem.", text_pair=None)]
    lengths = token_lengths(packaged_model_dir, rows, 512).lengths
    assert lengths[0] == 5
    assert counted_tokens(512) <= lengths[1] < 2_000_000


def test_auto_buckets_pad_the_fewest_tokens_with_at_most_three_widths_below_the_width():
    snippets = LengthProfile.of([12] * 40 + [28] * 40 + [44] * 15 + [60] * 5)
    choice = choose_buckets(snippets, 64, AUTO)
    assert choice.buckets == (16, 32, 48)  # each text at the multiple of 16 just above it: no padding wider
    assert choice.padded_share < choice.padded_share_one_width
    assert padded_tokens(snippets, 64, choice.buckets) == 40 * 16 + 40 * 32 + 15 * 48 + 5 * 64
    assert "16, 32, 48 (auto" in choice.describe() and "at one width" in choice.describe()


def test_a_further_width_must_save_padding_and_the_configs_widths_win():
    uniform = LengthProfile.of([30] * 100)
    assert choose_buckets(uniform, 64, AUTO).buckets == (32,)  # one width holds them all: no more shapes
    assert choose_buckets(LengthProfile.of([60] * 100), 64, AUTO).buckets == ()
    assert choose_buckets(uniform, 64, (32, 128)).buckets == (32,)  # a width over max_seq_length is unused
    assert choose_buckets(uniform, 64, ()).padded_share == pytest.approx(1 - 30 / 64)
    assert choose_buckets(uniform, 16, AUTO).buckets == ()  # no multiple of 16 below the width


def test_texts_longer_than_the_width_are_counted_cut_to_it():
    assert padded_tokens(LengthProfile.of([10, 600]), 512, (16,)) == 16 + 512
    assert padding_share(LengthProfile.of([600]), 512, ()) == 0.0


def test_windows_cover_a_text_one_step_past_the_first_window_at_a_time():
    from models.tokenizers.windows import Windows

    windows = Windows.over(width=16, special_tokens=2, stride=0.5, count=4)
    assert (windows.budget, windows.step) == (14, 7)
    assert [windows.needed(n) for n in (0, 14, 15, 21, 22, 40)] == [1, 1, 2, 2, 3, 5]
    assert windows.split(26) == [14, 14, 12]  # [0, 14), [7, 21), [14, 26)
    assert windows.split(60) == [14, 14, 14, 14]  # four at most: the rest is cut


def test_auto_windows_hold_99_percent_of_the_texts_and_say_what_they_cost():
    from models.training.lengths import MAX_AUTO_WINDOWS, choose_windows

    texts = LengthProfile.of([16] * 50 + [28] * 49 + [400])  # special tokens included: 14 and 26 text tokens
    choice = choose_windows(texts, 16, 0.5, AUTO)
    assert choice.windows.count == 3 and choice.cut_share == pytest.approx(0.01)
    assert sorted(set(choice.trained.lengths)) == [14, 16]  # the last window of a 26-token text holds 12
    assert len(choice.trained.lengths) == 50 + 49 * 3 + 3
    assert "at most 3 per text (auto: 99% of the texts whole)" in choice.describe()
    speeches = choose_windows(LengthProfile.of([6000] * 10), 512, 0.5, AUTO)
    assert speeches.windows.count == MAX_AUTO_WINDOWS and speeches.cuts_most and "need 23" in speeches.reason
    assert choose_windows(texts, 16, 1.0, 2).reason == "set in the config"
