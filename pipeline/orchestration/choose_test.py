"""What `--check` says of a training step's memory: the estimate always, a warning with the fix where it would not
fit this machine."""

import types

from models.encoders.step_memory import machine_memory
from models.encoders.step_memory_test import MINILM, MODERNBERT_BASE
from pipeline.config import pipeline_config
from pipeline.orchestration.choose import memory_lines


def _chosen(shape, batch, width, block_dropout=None):
    config = pipeline_config.load_config(overrides={"training.batch_size": batch})
    width_choice = types.SimpleNamespace(width=width)
    return types.SimpleNamespace(encoder=shape, config=config, lengths=width_choice, block_dropout=block_dropout)


def test_the_default_shape_fits_and_is_said_once():
    (line,) = memory_lines(_chosen(MINILM, 32, 64))
    assert line.startswith("memory: a training step of 32 texts at width 64 holds ~") and "AdamW" in line


def test_a_step_past_this_machines_memory_is_warned_with_the_batch_or_width_that_fits():
    lines = memory_lines(_chosen(MODERNBERT_BASE, 64, 2048))
    if machine_memory() < 64 * 2**30:  # every machine of this project's kinds (24 GiB)
        assert lines[1].startswith("warning: that is more than this machine's"), lines
        assert "training.batch_size" in lines[1] and "fits at this width" in lines[1]
    lines = memory_lines(_chosen(MODERNBERT_BASE, 4096, 512))
    assert "training.batch_size" in lines[-1] and "fits at this width" in lines[-1]
    assert (
        "not one text fits at width 8192: lower model.max_seq_length"
        in memory_lines(_chosen(MODERNBERT_BASE, 1, 8192))[-1]
    )


def test_blocks_are_recomputed_where_kept_they_would_not_fit_and_that_is_exact():
    """ModernBERT-base's shape at 8,192 tokens: ~22 GiB with every block's activations kept; its blocks hold no
    dropout, so the Trainer recomputes them and the step fits. With dropout in its blocks, the warning names
    training.dropout 0 as the way to the same."""
    (line,) = memory_lines(_chosen(MODERNBERT_BASE, 1, 8192, block_dropout=0.0))
    assert line.startswith("memory: a training step of one text at width 8192 holds ~")
    assert "blocks recomputed in the backward pass" in line
    lines = memory_lines(_chosen(MODERNBERT_BASE, 1, 8192, block_dropout=0.1))
    assert "blocks recomputed" not in lines[0] and "training.dropout 0, with which the Trainer recomputes" in lines[1]
    (line,) = memory_lines(_chosen(MODERNBERT_BASE, 2, 512, block_dropout=0.0))  # fits kept: nothing recomputed
    assert "blocks recomputed" not in line


def test_packing_true_where_the_run_cannot_pack_is_refused_before_any_component():
    import pytest

    from models.training.lengths import LengthProfile, choose_buckets
    from models.training.packing import PackingError
    from pipeline.orchestration.choose import expected_packing

    profile = LengthProfile.of([10, 20, 30, 40] * 50)
    buckets = choose_buckets(profile, 64, "auto")
    config = pipeline_config.load_config(overrides={"training.packing": True})
    with pytest.raises(PackingError, match=r"model\.long_texts: windows trains each window"):
        expected_packing(config, profile, 64, buckets, windowed=True)
    split = pipeline_config.load_config(overrides={"training.packing": True, "training.cpu_replicas": 2})
    with pytest.raises(PackingError, match=r"set training\.packing to auto or false"):
        expected_packing(split, profile, 64, buckets, windowed=False)
    auto = expected_packing(
        pipeline_config.load_config(overrides={"training.packing": "auto"}), profile, 64, buckets, windowed=True
    )
    assert not auto.packed and "windows" in auto.describe()
    assert expected_packing(config, profile, 64, buckets, windowed=False).packed
