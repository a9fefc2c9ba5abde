import datetime
import json

import pytest

from models.errors import UserError
from models.serving.prediction_log import LogSettings, PredictionLog
from pipeline.config import pipeline_config
from pipeline.monitoring.accuracy_estimate import AccuracyEstimate
from pipeline.monitoring.checks import CheckResult
from pipeline.monitoring.monitor import MonitorReport, drifted_report, monitor, report_path, write_json
from pipeline.monitoring.monitor_page import read_reports, write_monitor_page


def _report(moved: bool, first: str = "t0", last: str = "t1") -> MonitorReport:
    checks = (
        CheckResult("script", "L-infinity", 0.9 if moved else 0.0, 0.05, 0.01),
        CheckResult("confidence", "Jensen-Shannon", 0.01, 0.05, 0.02),
    )
    estimate = AccuracyEstimate(0.7 if moved else 0.8, 0.65 if moved else 0.75, 0.85, 0.82)
    return MonitorReport("17", 500, first, last, "run-1", "", checks, estimate, 2, 0)


def test_reports_say_the_verdict_and_the_newest_drifted_one_is_found(tmp_path):
    at = datetime.datetime(2026, 11, 29, 10, tzinfo=datetime.UTC)
    write_json(_report(moved=True), report_path(tmp_path, "17", at))
    write_json(_report(moved=False), report_path(tmp_path, "17", at + datetime.timedelta(hours=1)))
    (tmp_path / "version=17" / "20261129T120000Z.json").write_text("{cut off")
    assert drifted_report(tmp_path, "17") == "20261129T100000Z.json: drift: script"
    assert drifted_report(tmp_path, "18") is None

    lines = _report(moved=True).lines()
    assert lines[0] == (
        "model version 17: 500 served rows from t0 to t1; skipped 2 lines and 0 shards that were not rows"
    )
    assert "verdict: drift: script" in lines and lines[-1].startswith("estimated accuracy 0.70 (0.65-0.85)")
    data, attributes = _report(moved=True).message()
    assert attributes == {"event": "serving_drift", "model_version": "17"} and json.loads(data)["drift"] is True


def test_a_window_too_small_or_of_hashes_for_a_queue_is_refused_before_anything_is_read(tmp_path):
    log = PredictionLog(LogSettings(str(tmp_path), texts="hash"), "17")
    answer = {"probabilities": [0.4, 0.6], "label": "pos", "label_id": 1}
    for _ in range(160):
        log.record("serving_default", {"text": [b"a film"]}, [answer])
    log.close()
    config = pipeline_config.load_config(overrides={"pipeline_root": str(tmp_path / "no-runs")})
    with pytest.raises(UserError, match=r"160 rows of model version 17.*at least 200 \(40 more\)"):
        monitor(config, str(tmp_path))
    with pytest.raises(UserError, match="this log holds hashes: serve with --log-texts full"):
        monitor(config, str(tmp_path), min_rows=100, queue=5)


def test_the_page_shows_every_window_of_the_version_newest_first_with_plots_over_time(tmp_path):
    at = datetime.datetime(2026, 11, 29, 10, tzinfo=datetime.UTC)
    for hour, moved in enumerate((False, False, True)):
        last = at + datetime.timedelta(hours=hour)
        write_json(_report(moved, at.isoformat(), last.isoformat()), report_path(tmp_path, "17", last))
    folder = tmp_path / "version=17"
    (folder / "20261129T230000Z.json").write_text("{cut off")
    assert [report["drift"] for report in read_reports(folder)] == [False, False, True]
    page = write_monitor_page(folder).read_text()
    assert page.count("data:image/png;base64,") == 2  # the checks and the estimate over the windows
    assert '<p class="verdict false">drift: script</p>' in page
    windows = page[page.index('<section id="windows">') :]
    assert windows.count("<tr><td>2026-11-29T10:00:00+00:00 to") == 3
    assert windows.index("drift: script") < windows.index("no drift")  # the newest window first
    assert "0.700 (0.650-0.850)" in windows and "<td>moved</td>" in page
