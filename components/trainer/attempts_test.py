"""The attempt log: restarts and the steps each one trains again, across processes."""

from components.trainer.attempts import AttemptLog


def test_a_restart_counts_the_steps_between_its_checkpoint_and_the_furthest_step_reached(tmp_path):
    checkpoints = str(tmp_path / ".resume" / "key")
    first = AttemptLog(checkpoints)
    first.started_anew()
    first.reached(40, 0.5)
    first.reached(60, 0.5)  # the process dies here; its last checkpoint was at step 50
    second = AttemptLog(checkpoints)  # a new process
    assert second.resumed(50) == {"at_step": 50, "redone_steps": 10, "redone_seconds": 5.0}
    second.reached(80, 0.5)
    assert AttemptLog(checkpoints).resumed(80) == {"at_step": 80, "redone_steps": 0, "redone_seconds": 0.0}
    assert [r["at_step"] for r in second.finish()] == [50, 80]
    assert not (tmp_path / ".resume" / "key-attempts.json").exists()
    assert AttemptLog(checkpoints).finish() == []


def test_a_first_attempt_drops_what_an_earlier_run_left(tmp_path):
    log = AttemptLog(str(tmp_path / "key"))
    log.reached(30, 1.0)
    log.resumed(20)
    log.started_anew()
    assert log.read()["resumes"] == [] and log.read()["furthest_step"] == 0
