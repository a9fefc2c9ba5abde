import datetime
import json

import pytest

from models.errors import UserError
from models.serving.prediction_log import LogSettings, PredictionLog
from pipeline.config import pipeline_config
from pipeline.monitoring.accuracy_estimate import AccuracyEstimate
from pipeline.monitoring.checks import CheckResult
from pipeline.monitoring.monitor import MonitorReport, drifted_report, monitor, report_path, write_json


def _report(moved: bool) -> MonitorReport:
    checks = (
        CheckResult("script", "L-infinity", 0.9 if moved else 0.0, 0.05, 0.01),
        CheckResult("confidence", "Jensen-Shannon", 0.01, 0.05, 0.02),
    )
    return MonitorReport("17", 500, "t0", "t1", "run-1", "", checks, AccuracyEstimate(0.8, 0.75, 0.85, 0.82), 2, 0)


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
    assert "verdict: drift: script" in lines and lines[-1].startswith("estimated accuracy 0.80 (0.75-0.85)")
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
