"""The run summary's training lines: several workers, the restarts a run survived, the epochs and why."""

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


def test_the_epochs_line_says_which_rule_held_epochs_against_patience():
    """An epoch without a better val_loss does not count against patience while the training loss sits at the prior's
    (the plateau) or while the eval loss is within the eval split's noise of the best: the summary counts each."""
    record = TrainingRecord(
        epochs=10, epochs_run=9, monitor="val_loss", best_epoch=6, best_value=0.5123, stopped_early=True, patience=3,
        held=2, within_noise=1,
    )  # fmt: skip
    assert (
        "stopped after epoch 9, at most 10: val_loss did not improve by more than 0 for 3 epoch(s); not counted "
        "against patience: 2 with the training loss still at the prior's, 1 with the eval loss within its noise of "
        "the best; epoch 6 exported: best val_loss 0.5123"
    ) in _summary(record).replace("\n", " ")
    assert "not counted" not in _summary(TrainingRecord(epochs=10, epochs_run=4, monitor="val_loss", best_epoch=2,
                                                       best_value=0.5, stopped_early=True, patience=2))  # fmt: skip
