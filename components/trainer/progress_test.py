"""The Trainer's progress lines under a real tf_keras fit: every log_every_steps steps, and where one replica trains
at least every SILENT_SECONDS (a long step would otherwise leave the run silent for half an hour)."""

from __future__ import annotations

import numpy as np
import pytest
import tf_keras

from components.trainer import progress
from components.trainer.training_record import rate_text


def _fit(steps: int, every: int, capsys) -> list[str]:
    model = tf_keras.Sequential([tf_keras.layers.Dense(2)])
    model.compile("sgd", tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    x, y = np.ones((steps, 3), np.float32), np.zeros(steps, np.int64)
    model.fit(x, y, batch_size=1, epochs=1, verbose=0, callbacks=[progress.ProgressLogger(steps, 1, every)])
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith("[Trainer] step ")]


def test_lines_come_every_few_steps_and_at_the_last(capsys):
    lines = _fit(7, 3, capsys)
    assert [line.split()[2] for line in lines] == ["3/7", "6/7", "7/7"]


@pytest.mark.parametrize("silent_seconds, expected", [(0.0, 5), (3600.0, 1)])
def test_one_replica_also_logs_when_a_line_is_overdue(monkeypatch, capsys, silent_seconds, expected):
    monkeypatch.setattr(progress, "SILENT_SECONDS", silent_seconds)
    lines = _fit(5, 25, capsys)
    assert len(lines) == expected and lines[-1].split()[2] == "5/5"


def test_slow_rates_read_as_seconds_an_example():
    assert rate_text(93.84) == "93.8 examples/s"
    assert rate_text(8 / 961) == "120 s an example"


def test_the_epoch_line_shows_the_metrics_a_person_reads(capsys):
    """The loss squared (averaged only to measure the eval split's noise, best_epoch.py) stays out of the line."""
    logger = progress.ProgressLogger(total_steps=10, global_batch=4, every=5)
    logger.validation_seconds = 0.0
    logger.on_epoch_begin(0)
    logger.on_epoch_end(0, {"loss": 0.61, "loss_squared": 0.4, "val_loss": 0.6, "val_loss_squared": 0.39})
    line = capsys.readouterr().out
    assert "epoch 1 done: loss 0.6100, val_loss 0.6000" in line and "squared" not in line
