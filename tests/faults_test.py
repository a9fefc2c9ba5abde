"""Faults survived: corrupted inputs, full disks, a second run on the same root, a Trainer killed mid-run."""

import glob
import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import tensorflow as tf

# TFX reloads components.trainer.module when it runs run_fn, so its classes are looked up at call time.
from components.trainer import data as trainer_data
from components.trainer import plan as trainer_plan
from pipeline.config.pipeline_config import load_config
from pipeline.orchestration import root_lock
from pipeline.reporting.metadata_reader import summarize
from pipeline.reporting.report import run_report_path, run_summary_json_path
from tests.tiny_model import tiny_run_command


def _write_records(path, n):
    with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
        for i in range(n):
            writer.write(
                tf.train.Example(
                    features=tf.train.Features(
                        feature={"x": tf.train.Feature(int64_list=tf.train.Int64List(value=[i]))}
                    )
                ).SerializeToString()
            )


def test_truncated_tfrecord_is_named_not_skipped(tmp_path):
    _write_records(tmp_path / "part-0.gz", 50)
    _write_records(tmp_path / "part-1.gz", 50)
    assert trainer_data.count_records([str(tmp_path / "*.gz")]) == 100
    data = (tmp_path / "part-1.gz").read_bytes()
    (tmp_path / "part-1.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(trainer_data.CorruptInputError, match=r"part-1\.gz is truncated or corrupted.*not skipped"):
        trainer_data.count_records([str(tmp_path / "*.gz")])


def test_corrupted_record_payload_is_named(tmp_path):
    raw = tmp_path / "raw"
    _write_records(raw, 20)  # gzip framing around records; flip bytes inside the decompressed stream
    payload = bytearray(gzip.decompress(raw.read_bytes()))
    payload[40:60] = b"\xff" * 20
    (tmp_path / "bad.gz").write_bytes(gzip.compress(bytes(payload)))
    with pytest.raises(trainer_data.CorruptInputError, match=r"bad\.gz"):
        trainer_data.count_records([str(tmp_path / "bad.gz")])


def test_disk_space_is_checked_before_training(tmp_path):
    model = tf.keras.Sequential([tf.keras.layers.Dense(4)])
    model.build((None, 8))
    trainer_plan.check_disk_space(model, [str(tmp_path)])
    with pytest.raises(trainer_plan.DiskSpaceError, match=r"GiB free under .*need about .* Free disk space"):
        trainer_plan.check_disk_space(model, [str(tmp_path)], factor=1e15)


def test_second_run_on_the_same_root_is_refused_and_a_dead_holder_does_not_block(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import time
        from pipeline.orchestration import root_lock
        with root_lock.pipeline_root_lock({str(root)!r}):
            print("locked", flush=True)
            time.sleep(60)
    """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "locked"
    busy = pytest.raises(root_lock.PipelineRootBusyError, match=rf"pid {holder.pid}.*own --pipeline-root")
    with busy, root_lock.pipeline_root_lock(str(root)):
        pass
    holder.kill()
    holder.wait()
    with root_lock.pipeline_root_lock(str(root)):
        pass


@pytest.mark.e2e
def test_killed_trainer_resumes_from_its_checkpoint_and_finished_components_come_from_cache(tmp_path, tiny_bert_dir):
    """Killed after its first epoch, with early stopping on: the rerun resumes both the training checkpoint and
    the early-stopping state (best epoch, patience), and exports the best epoch."""
    root = tmp_path / "root"
    args = tiny_run_command(
        tiny_bert_dir, tmp_path, "--epochs", "4", "--set", "training.early_stopping.patience=4",
        "--set", "training.checkpoint_every_steps=10", "--set", "training.log_every_steps=10", train=240,
    )  # fmt: skip
    first = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.monotonic() + 600
    state = []
    while not state and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.2)
        state = glob.glob(str(root / "Trainer" / ".resume" / "*-best" / "state.json"))
    assert state, "the Trainer ended no epoch before the run ended"
    assert glob.glob(str(root / "Trainer" / ".resume" / "*" / "chief" / "checkpoint"))
    os.killpg(first.pid, signal.SIGKILL)  # in the second of 4 epochs of 30 steps
    first.wait()
    assert not (tmp_path / "serving").exists() or not os.listdir(tmp_path / "serving" / "text_classifier")

    second = subprocess.run(args, capture_output=True, text=True, timeout=900, check=False)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    resumed = [line for line in second.stdout.splitlines() if "resumed from the checkpoint at step" in line]
    assert resumed, second.stdout[-3000:]
    step = int(resumed[0].split("at step ")[1].split("/")[0])
    assert 30 <= step < 120
    assert "early stopping resumed: best val_loss" in second.stdout and "at epoch 1" in second.stdout
    assert "epoch(s) exported" not in second.stdout
    assert "all 4 epochs ran, at most 4 (training.epochs); epoch " in second.stdout
    states = {
        line.split()[0]: line.split()[1]
        for line in second.stdout.splitlines()
        if line.startswith("  ") and len(line.split()) == 3 and line.split()[1] in ("done", "cached")
    }
    assert states["HFDatasetExampleGen"] == states["Transform"] == "cached"
    assert states["Trainer"] == "done"
    assert "BLESSED" in second.stdout
    assert not glob.glob(str(root / "Trainer" / ".resume" / "*" / "chief" / "checkpoint")), "checkpoint cleaned up"
    assert not glob.glob(str(root / "Trainer" / ".resume" / "*-best")), "early-stopping state cleaned up"

    # Beside the run's page, its summary with what ML Metadata does not hold, for `make bench`.
    config = load_config(overrides={"pipeline_root": str(root)})
    latest = summarize(config.metadata_sqlite, config.pipeline_name)
    recorded = json.loads(run_summary_json_path(config, latest.run_id).read_text())
    assert recorded["run_id"] == latest.run_id
    assert recorded["wall_seconds"] > 0 and recorded["peak_rss_bytes"] > 0
    assert f"report: {run_report_path(config, latest.run_id)}" in second.stdout
