"""The local trigger's edges that need no training: refusals, an empty data root, the watch loop."""

import io

import pytest

from pipeline import cli
from pipeline.config import pipeline_config
from pipeline.retraining import local_trigger


def spanned_config(tmp_path):
    return pipeline_config.load_config(
        overrides={
            "pipeline_root": str(tmp_path / "root"),
            "serving_dir": str(tmp_path / "serving"),
            "dataset.name": "csv",
            "dataset.data_files": [f"{tmp_path}/data/span-{{SPAN}}/*.csv"],
        }
    )


def test_triggers_refuse_data_without_spans_and_say_how_to_add_them(tmp_path, capsys):
    with pytest.raises(pipeline_config.ConfigError, match=r"put \{SPAN\} in dataset.data_files"):
        local_trigger.check(pipeline_config.load_config())
    assert cli.main(["trigger", "check", "--pipeline-root", str(tmp_path)]) == 2
    assert "triggers need span-versioned data" in capsys.readouterr().err


def test_watch_polls_at_its_interval_and_starts_nothing_without_data(tmp_path):
    out, sleeps = io.StringIO(), []
    runs = local_trigger.watch(spanned_config(tmp_path), interval=42, max_polls=3, stream=out, sleep=sleeps.append)
    assert runs == 0
    assert sleeps == [42, 42]
    assert out.getvalue().count("[trigger] skip: no span of data exists yet") == 3


def test_watch_survives_a_failing_poll(tmp_path, monkeypatch):
    calls = []

    def failing_run(config, **_):
        calls.append(config)
        raise RuntimeError("disk full")

    monkeypatch.setattr(local_trigger, "trigger_run", failing_run)
    out = io.StringIO()
    assert local_trigger.watch(spanned_config(tmp_path), interval=1, max_polls=2, stream=out, sleep=lambda _: None) == 0
    assert len(calls) == 2
    assert out.getvalue().count("[trigger] run failed: RuntimeError: disk full") == 2


def test_a_span_that_cannot_be_read_is_named(tmp_path):
    config = spanned_config(tmp_path)
    (tmp_path / "data" / "span-1").mkdir(parents=True)
    (tmp_path / "data" / "span-1" / "part.csv").write_text("review,stars\ngood,5\n")
    with pytest.raises(Exception, match="text column 'text' is not in split 'train'"):
        local_trigger.trigger_run(config, stream=io.StringIO())
