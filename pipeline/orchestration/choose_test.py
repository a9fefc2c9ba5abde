"""What `--check` says of a training step's memory: the estimate always, a warning with the fix where it would not
fit this machine."""

import types

from models.encoders.step_memory import machine_memory
from models.encoders.step_memory_test import MINILM, MODERNBERT_BASE
from pipeline.config import pipeline_config
from pipeline.orchestration.choose import memory_lines


def _chosen(shape, batch, width):
    config = pipeline_config.load_config(overrides={"training.batch_size": batch})
    return types.SimpleNamespace(encoder=shape, config=config, lengths=types.SimpleNamespace(width=width))


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
