"""The run summary's training lines: several workers and the restarts a run survived."""

from components.trainer.training_record import TrainingRecord
from pipeline.reporting.run_summary import RunSummary


def _summary(training: TrainingRecord) -> str:
    return RunSummary("p", "run-1", [], {}, ["neg", "pos"], {}, None, "", None, None, training=training).render()


def test_workers_and_resumes_are_said_only_when_there_were_any():
    alone = _summary(TrainingRecord(epochs=2, epochs_run=2))
    assert "workers " not in alone and "resumed " not in alone
    resumes = [
        {"at_step": 200, "redone_steps": 37, "redone_seconds": 18.5},
        {"at_step": 400, "redone_steps": 12, "redone_seconds": 6.0},
    ]
    shown = _summary(TrainingRecord(epochs=2, epochs_run=2, workers=4, resumes=resumes))
    assert "  workers       4 machines in lock-step (MultiWorkerMirroredStrategy)" in shown
    assert (
        "  resumed       2 time(s), from the checkpoints at step(s) 200, 400; about 49 step(s) (24s) trained again"
        in shown
    )
