"""The default run's expected time comes from the machine's measured peak and the corpus as the Trainer pads it."""

import pytest

from pipeline.machine import doctor, estimate


def test_examples_pad_to_the_smallest_bucket_width_that_holds_them():
    # token counts + [CLS] and [SEP]: 7 -> 32, 32 -> 32, 33 -> 64, 102 -> cut to 64
    assert estimate.padded_widths([5, 30, 31, 100], 64, (32,)) == [32, 32, 64, 64]
    assert estimate.padded_widths([5, 100], 64, ()) == [64, 64]
    assert estimate.padded_widths([5], 64, (16, 128)) == [16]  # a bucket wider than the model is unused


def test_doctor_measures_both_peaks_and_estimates_the_default_run():
    fp32, bf16, expected = doctor._machine_speed()
    with pytest.raises(RuntimeError, match="fp32 peak"):
        expected()
    assert "GFLOP/s on /CPU:0" in fp32() and "GFLOP/s" in bf16()
    line = expected()
    assert line.startswith("default run ~") and "TFLOP at" in line


def test_estimate_scales_with_the_peak():
    slow, fast = estimate.estimate_default_run(60.0), estimate.estimate_default_run(150.0)
    assert slow.training_flops == fast.training_flops > 1e12  # MiniLM-L6 over ~10k reviews: tens of TFLOP
    assert slow.total_seconds == pytest.approx(fast.total_seconds * 150 / 60)


def test_frozen_embeddings_are_estimated_without_the_gradients_the_trainer_skips():
    from pipeline.config.pipeline_config import load_config

    trained = estimate.default_training_flops(load_config())
    frozen = estimate.default_training_flops(load_config(overrides={"training.freeze_embeddings": True}))
    assert 0.98 < frozen / trained < 0.99  # MiniLM-L6: the first layer's Q/K/V input gradients, ~1.4%


def test_the_reference_figures_come_from_the_recorded_default_run(tmp_path):
    reference = estimate.Reference.read()
    assert 0 < reference.trainer_utilization < 1 and reference.peak_gflops > 0
    assert reference.seconds_outside_training > 0
    with pytest.raises(RuntimeError, match="make bench"):
        estimate.Reference.read(tmp_path / "missing.json")


def test_an_epochs_cost_follows_the_chosen_width_the_examples_and_the_peak():
    from models.hardware.flops import EncoderShape
    from models.training.lengths import LengthProfile, choose_width

    minilm = EncoderShape(layers=6, hidden=384, intermediate=1536, heads=12, num_labels=2)
    speeches = LengthProfile.of([300, 400, 500, 600])
    short, long = choose_width(speeches, 64, 512), choose_width(speeches, "auto", 512)
    assert long.width == 512
    seconds = estimate.epoch_seconds(long, 1000, (32,), minilm, 100.0)
    assert seconds > 8 * estimate.epoch_seconds(short, 1000, (32,), minilm, 100.0)  # 8x the tokens, and attention
    assert estimate.epoch_seconds(long, 2000, (32,), minilm, 100.0) == pytest.approx(2 * seconds)
    assert estimate.epoch_seconds(long, 1000, (32,), minilm, 200.0) == pytest.approx(seconds / 2)


def test_a_packed_epoch_is_costed_as_rows_of_the_width_holding_the_texts_and_the_padding_left():
    """The default run packs (training.packing: auto): its epoch is the texts' tokens in rows of the chosen width,
    with the padding the packed rows keep, not each text at its batch width."""
    from models.hardware.flops import EncoderShape
    from models.training.lengths import LengthProfile, choose_width

    minilm = EncoderShape(layers=6, hidden=384, intermediate=1536, heads=12, num_labels=2)
    reviews = choose_width(LengthProfile.of([10, 20, 30, 40] * 50), 64, 512)
    packed = estimate.padded_shapes(reviews, (32,), packed_padding=0.25)
    assert packed.examples == 200 and packed.real_tokens == 5000
    assert packed.padded_tokens == pytest.approx(5000 / 0.75)  # rows of 64 tokens, a quarter of them padding
    bucketed = estimate.padded_shapes(reviews, (32,))
    assert bucketed.padded_tokens == 32 * 150 + 64 * 50  # each text at the narrowest of 32 and 64 that holds it
    ratio = estimate.epoch_seconds(reviews, 1000, (32,), minilm, 100.0, packed_padding=0.25) / estimate.epoch_seconds(
        reviews, 1000, (32,), minilm, 100.0
    )
    assert ratio == pytest.approx(packed.training_flops(minilm) / bucketed.training_flops(minilm))
    assert ratio < 1
