"""The Trainer on several workers, as Vertex AI runs its CustomJob: every replica runs TFX's container command
with the TF_CONFIG Vertex AI sets, under MultiWorkerMirroredStrategy (ring all-reduce over gRPC on localhost).
The inputs are a finished local run's Transform outputs."""

import io
import json
import os
import signal
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from tests import trainer_cluster
from tests.tiny_model import tiny_overrides

pytestmark = pytest.mark.e2e

EPOCHS, TRAIN_ROWS, GLOBAL_BATCH = 2, 128, 8  # 16 steps per epoch
STEPS = EPOCHS * TRAIN_ROWS // GLOBAL_BATCH
# Dropout off: two workers then compute what one machine computes with the same global batch, up to the order
# of the all-reduce's additions, so the comparison can be tight instead of a seed spread.
TRAINING = {"dropout": 0.0, "epochs": EPOCHS, "learning_rate": 1e-3, "log_every_steps": 2, "checkpoint_every_steps": 2}


@pytest.fixture(scope="module")
def local_run(tmp_path_factory, tiny_bert_dir) -> Path:
    """A local run of the tiny BERT up to its Trainer (what follows is not this module's), on one machine with
    global batch GLOBAL_BATCH: the reference, and the source of the Trainer's inputs (its ML Metadata)."""
    from tfx.orchestration import pipeline as tfx_pipeline
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner

    from components.local_beam import local_beam_runner
    from pipeline.config import pipeline_config
    from pipeline.orchestration.local_runner import prepare_run

    workdir = tmp_path_factory.mktemp("multi-worker")
    overrides = {
        **tiny_overrides(workdir, tiny_bert_dir, 32),
        "dataset.limits": {"train": TRAIN_ROWS, "eval": 64, "test": 96},
        "training.batch_size": GLOBAL_BATCH,
        **{f"training.{key}": value for key, value in TRAINING.items()},
    }
    with local_beam_runner():
        whole, _ = prepare_run(pipeline_config.load_config(overrides=overrides), stream=io.StringIO())
        (trainer,) = [c for c in whole.components if c.id == "Trainer"]
        upstream, frontier = {trainer}, [trainer]
        while frontier:
            frontier = [node for c in frontier for node in c.upstream_nodes if node not in upstream]
            upstream.update(frontier)
        for node in upstream:  # a pipeline holds every node its nodes name
            for dropped in [d for d in node.downstream_nodes if d not in upstream]:
                node.remove_downstream_node(dropped)
        with warnings.catch_warnings():  # TFX warns that the nodes were built for the whole pipeline: they were
            warnings.filterwarnings("ignore", message="Component .* is not found from the registry")
            trimmed = tfx_pipeline.Pipeline(
                pipeline_name=whole.pipeline_info.pipeline_name,
                pipeline_root=whole.pipeline_info.pipeline_root,
                components=[c for c in whole.components if c in upstream],
                metadata_connection_config=whole.metadata_connection_config,
                beam_pipeline_args=whole.beam_pipeline_args,
            )
            LocalDagRunner().run(trimmed)
    return workdir / "pipeline"


@pytest.fixture(scope="module")
def recorded(local_run):
    return trainer_cluster.recorded_trainer_inputs(local_run / "metadata.sqlite")


def custom_job(recorded, root: Path, workers: int, per_replica_batch: int) -> dict:
    return trainer_cluster.trainer_custom_job(recorded, root, workers, batch_size=per_replica_batch, **TRAINING)


def exported_weights(root: Path) -> dict[str, np.ndarray]:
    (hf_dir,) = (root / "Trainer" / "model").glob("*/Format-HF")
    return load_file(str(hf_dir / "model.safetensors"))


def record(root: Path) -> dict:
    (path,) = (root / "Trainer" / "model_run").glob("*/training_record.json")
    return json.loads(path.read_text())


def epoch_lines(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if line.startswith("[Trainer] epoch ")]


def test_two_workers_train_in_lock_step_and_the_chief_alone_exports_what_one_machine_would(
    recorded, local_run, tmp_path
):
    two = tmp_path / "two"
    job = custom_job(recorded, two, workers=2, per_replica_batch=GLOBAL_BATCH // 2)
    chief_pool, worker_pool = job["job_spec"]["worker_pool_specs"]
    assert (chief_pool["replica_count"], worker_pool["replica_count"]) == (1, 1)
    assert job["job_spec"]["scheduling"] == {"restart_job_on_worker_restart": True}
    replicas = trainer_cluster.start_replicas(job, two / "logs")
    assert [replica.wait(timeout=900) for replica in replicas] == [0, 0], (two / "logs" / "replica-1.log").read_text()
    chief_log, worker_log = (two / "logs" / f"replica-{n}.log" for n in (0, 1))
    chief_text, worker_text = chief_log.read_text(), worker_log.read_text()
    assert "multi-worker (CollectiveAllReduceStrategy, 2 replica(s), chief 0 of 2 workers)" in chief_text
    assert "global batch 8" in chief_text and "worker 0 of 2 workers" in worker_text
    # Lock-step: the same steps and the same all-reduced metrics at every epoch's end, on both.
    assert len(epoch_lines(chief_log)) == EPOCHS
    assert [line.split(" (validation")[0] for line in epoch_lines(chief_log)] == [
        line.split(" (validation")[0] for line in epoch_lines(worker_log)
    ]
    assert f"step {STEPS}/{STEPS}" in chief_text and f"step {STEPS}/{STEPS}" in worker_text
    # The chief alone writes: one export, one record; the worker says it left the export to the chief.
    assert "exported SavedModel" in chief_text and "exported SavedModel" not in worker_text
    assert "trained; the chief exports" in worker_text
    assert record(two)["workers"] == 2 and record(two)["resumes"] == []
    assert sorted(p.name for p in next((two / "Trainer" / "model").iterdir()).iterdir()) == [
        "Format-HF", "Format-Serving"
    ]  # fmt: skip

    # The local run trained the same settings on one machine with the same global batch: the same model, to
    # float rounding, and the same eval metrics.
    one = local_run
    assert record(one)["exported_eval"]["val_loss"] == pytest.approx(record(two)["exported_eval"]["val_loss"], abs=1e-4)
    assert record(one)["exported_eval"]["val_accuracy"] == record(two)["exported_eval"]["val_accuracy"]
    alone_weights, together = exported_weights(one), exported_weights(two)
    assert alone_weights.keys() == together.keys()
    moved = max(float(np.abs(v).max()) for v in alone_weights.values())
    assert moved > 0
    assert max(float(np.abs(alone_weights[k] - together[k]).max()) for k in together) < 1e-4


def test_a_killed_worker_restarts_the_job_which_resumes_from_the_checkpoint_and_exports_once(recorded, tmp_path):
    """As Vertex AI does with restart_job_on_worker_restart: one worker dies mid-epoch, the job's replicas are
    restarted together, and training continues from the last checkpoint in the pipeline root."""
    job = custom_job(recorded, tmp_path, workers=2, per_replica_batch=GLOBAL_BATCH // 2)
    logs = tmp_path / "logs"
    chief, worker = trainer_cluster.start_replicas(job, logs)
    attempts = []
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and chief.poll() is None:
        attempts = list((tmp_path / "Trainer" / ".resume").glob("*-attempts.json"))
        if attempts and json.loads(attempts[0].read_text() or "{}").get("furthest_step", 0) >= 6:
            break
        time.sleep(0.1)
    assert attempts, (logs / "replica-0.log").read_text()[-3000:]
    os.kill(worker.pid, signal.SIGKILL)  # mid-epoch 1: past the checkpoints at steps 2, 4 and 6
    worker.wait()
    chief.send_signal(signal.SIGTERM)  # the job restarts: Vertex AI stops the replicas still running
    chief.wait(timeout=120)
    assert not list((tmp_path / "Trainer" / "model").glob("*/Format-Serving/saved_model.pb")), "exported too soon"

    again = trainer_cluster.start_replicas(job, logs)
    assert [replica.wait(timeout=900) for replica in again] == [0, 0], (logs / "replica-1.log").read_text()[-3000:]
    chief_text = (logs / "replica-0.log").read_text()
    resumed = [line for line in chief_text.splitlines() if "resumed from the checkpoint at step" in line]
    assert len(resumed) == 1, chief_text[-3000:]
    step = int(resumed[0].split("at step ")[1].split("/")[0])
    assert 6 <= step < STEPS
    assert f"resumed from the checkpoint at step {step}/" in (logs / "replica-1.log").read_text()
    (resume,) = record(tmp_path)["resumes"]
    assert resume["at_step"] == step and resume["redone_steps"] >= 0
    assert chief_text.count("exported SavedModel") == 1
    (export,) = (tmp_path / "Trainer" / "model").iterdir()
    assert sorted(p.name for p in export.iterdir()) == ["Format-HF", "Format-Serving"]
    assert not list((tmp_path / "Trainer" / ".resume").glob("*-attempts.json")), "the attempt log went to the record"
