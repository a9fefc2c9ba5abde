"""Training attempts across restarts: how often a run resumed from its checkpoint and what each restart cost.

A crash, or a spot machine taken back by Google Cloud (Vertex AI then restarts the whole CustomJob), ends the
process that knew how far training had got. So the chief writes its furthest step beside the checkpoints as it
trains, and the attempt that resumes compares it with the step its checkpoint restored: the steps in between
were trained twice. The furthest step is written at each progress line, so the count is exact to within
training.log_every_steps.
"""

from __future__ import annotations

import json
import os

import tensorflow as tf


class AttemptLog:
    """`<checkpoints>-attempts.json`: {"furthest_step", "seconds_per_step", "resumes": [...]}; written by the
    chief alone, read back by the attempt that resumes, removed once the record has it."""

    def __init__(self, checkpoints: str):
        self.path = checkpoints.rstrip("/") + "-attempts.json"

    def read(self) -> dict:
        if not tf.io.gfile.exists(self.path):
            return {"furthest_step": 0, "seconds_per_step": 0.0, "resumes": []}
        with tf.io.gfile.GFile(self.path) as handle:
            return json.load(handle)

    def _write(self, state: dict) -> None:
        tf.io.gfile.makedirs(os.path.dirname(self.path))
        with tf.io.gfile.GFile(self.path, "w") as handle:
            handle.write(json.dumps(state))

    def reached(self, step: int, seconds_per_step: float) -> None:
        self._write({**self.read(), "furthest_step": step, "seconds_per_step": seconds_per_step})

    def resumed(self, at_step: int) -> dict:
        """Records a restart from the checkpoint at `at_step`; returns the entry (at_step, redone_steps,
        redone_seconds)."""
        state = self.read()
        redone = max(0, state["furthest_step"] - at_step)
        entry = {"at_step": at_step, "redone_steps": redone, "redone_seconds": redone * state["seconds_per_step"]}
        self._write({**state, "resumes": [*state["resumes"], entry]})
        return entry

    def started_anew(self) -> None:
        """A first attempt (no checkpoint restored): what an earlier run on other settings left is not ours."""
        if tf.io.gfile.exists(self.path):
            tf.io.gfile.remove(self.path)

    def finish(self) -> list[dict]:
        """The restarts of this run, and the log removed (as BackupAndRestore removes its checkpoints)."""
        resumes = self.read()["resumes"]
        self.started_anew()
        return resumes
