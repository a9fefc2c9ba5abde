import json
import os
import time

import pytest
import tensorflow as tf

from models.config_section import ConfigError, build_section
from models.errors import UserError
from models.serving.config import ServingConfig
from models.serving.prediction_log import LogSettings, PredictionLog, logged_versions, read_window

ANSWER = {"probabilities": [0.2, 0.8], "label_id": 1, "label": "pos", "confidence": 0.8}


def _request(texts):
    return {"text": [t.encode() for t in texts]}, [dict(ANSWER) for _ in texts]


def test_rows_are_written_per_version_and_read_back(tmp_path):
    log = PredictionLog(LogSettings(str(tmp_path)), "7")
    log.record("serving_default", *_request(["good film", "bad film"]))
    log.close()
    window = read_window(str(tmp_path))
    assert window.version == "7" and log.logged == 2 and log.dropped == 0
    assert [row["text"] for row in window.rows] == ["good film", "bad film"]
    assert window.rows[0]["label"] == "pos" and window.rows[0]["chars"] == 9
    (shard,) = logged_versions(str(tmp_path))["7"]
    assert shard.relative_to(tmp_path).parts[0] == "version=7" and shard.parts[-2].startswith("hour=")


def test_hash_mode_keeps_no_text_and_sampling_keeps_a_share(tmp_path):
    log = PredictionLog(LogSettings(str(tmp_path), sample=0.25, texts="hash"), "1")
    for _ in range(400):
        log.record("serving_default", *_request(["secret customer text"]))
    log.close()
    rows = read_window(str(tmp_path)).rows
    assert 60 < len(rows) < 140  # 100 expected
    assert "text" not in rows[0] and len(rows[0]["text_sha256"]) == 64 and rows[0]["chars"] == 20
    assert "secret" not in "".join(p.read_text() for p in tmp_path.rglob("*.jsonl"))


def test_tf_example_requests_log_their_texts(tmp_path):
    example = tf.train.Example()
    example.features.feature["text"].bytes_list.value.append(b"sent as an example")
    log = PredictionLog(LogSettings(str(tmp_path)), "1")
    log.record("serving_tf_example", {"examples": [example.SerializeToString()]}, [dict(ANSWER)])
    log.close()
    assert read_window(str(tmp_path)).rows[0]["text"] == "sent as an example"


def test_a_full_queue_drops_and_counts_rows_without_blocking(tmp_path):
    log = PredictionLog(LogSettings(str(tmp_path), max_queued_rows=10), "1")
    started = time.perf_counter()
    with log._lock:
        log._queued_rows = 10  # as if the writer were behind by a full queue
    log.record("serving_default", *_request(["one more"] * 3))
    assert log.dropped == 3 and time.perf_counter() - started < 0.1
    assert "3 dropped with the queue full" in log.closing_words()
    log.close()


def test_corrupt_and_cut_off_lines_are_skipped_and_counted_and_versions_kept_apart(tmp_path):
    for version in ("3", "12"):
        log = PredictionLog(LogSettings(str(tmp_path)), version)
        log.record("serving_default", *_request([f"text of {version}"] * 2))
        log.close()
    (shard,) = logged_versions(str(tmp_path))["12"]
    with open(shard, "a") as handle:
        handle.write('{"not": "a row"}\nnot json\n{"time": "2026-')  # a writer cut off mid-line
    window = read_window(str(tmp_path))
    assert window.version == "12" and window.skipped_lines == 3 and len(window.rows) == 2
    assert window.other_versions == {"3": 1}
    assert {row["text"] for row in read_window(str(tmp_path), version="3").rows} == {"text of 3"}
    with pytest.raises(UserError, match=r"no logs of model version 5; it has \['3', '12'\]"):
        read_window(str(tmp_path), version="5")
    with pytest.raises(UserError, match="holds no prediction logs"):
        read_window(str(tmp_path / "empty"))


def test_old_shards_go_past_the_retention_and_the_oldest_past_the_size_cap(tmp_path):
    old = tmp_path / "version=1" / "date=2026-01-01" / "hour=00" / "part-x-1-0-1.jsonl"
    old.parent.mkdir(parents=True)
    old.write_text(json.dumps({"time": "2026-01-01T00:00:00+00:00", "probabilities": [1.0]}) + "\n")
    os.utime(old, (time.time() - 40 * 86_400,) * 2)
    big = tmp_path / "version=1" / "date=2026-11-01" / "hour=00" / "part-x-1-0-2.jsonl"
    big.parent.mkdir(parents=True)
    big.write_text("x" * 600_000)
    os.utime(big, (time.time() - 86_400,) * 2)
    log = PredictionLog(LogSettings(str(tmp_path), max_mb=0.5), "1")
    assert not old.exists() and not big.exists()  # 40 days old; then over the 0.5 MB cap
    log.record("serving_default", *_request(["kept"]))
    log.close()
    assert [row["text"] for row in read_window(str(tmp_path)).rows] == ["kept"]


def test_settings_are_checked_by_the_config_section():
    with pytest.raises(ConfigError, match=r"serving\.log_sample"):
        build_section(ServingConfig, {"log_dir": "x", "log_sample": 0}, "serving")
    with pytest.raises(ConfigError, match=r"serving\.log_texts"):
        build_section(ServingConfig, {"log_dir": "x", "log_texts": "some"}, "serving")
    assert build_section(ServingConfig, {}).log_settings() is None  # off unless log_dir
    assert build_section(ServingConfig, {"log_dir": "x", "log_texts": "hash"}).log_settings().texts == "hash"


def test_a_write_that_fails_costs_its_rows_counted_and_the_writer_goes_on(tmp_path):
    import shutil

    log = PredictionLog(LogSettings(str(tmp_path)), "1")
    shutil.rmtree(log.folder)
    log.folder.write_text("not a folder")  # the next shard cannot be made under it
    log.record("serving_default", *_request(["lost"]))
    deadline = time.monotonic() + 10
    while not log.unwritten and time.monotonic() < deadline:
        time.sleep(0.01)
    log.folder.unlink()  # the disk is fine again
    log.record("serving_default", *_request(["kept"]))
    log.close()
    assert log.unwritten == 1 and "not written" in log.closing_words()
    assert [row["text"] for row in read_window(str(tmp_path)).rows] == ["kept"]
