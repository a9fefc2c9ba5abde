"""The retraining rules on their own: which span, whether to train, and the reason a person reads."""

import pytest

from pipeline.config.pipeline_config import RetrainingConfig
from pipeline.retraining.decision import DriftReport, FeatureDrift, RunRecord, decide

RULES = RetrainingConfig()


def run(span, outcome="complete", run_id=None, **kwargs):
    return RunRecord(run_id or f"run-{span}-{outcome}", span, outcome, **kwargs)


def drift(label_distance):
    return DriftReport(3, "run-1", (1,), (FeatureDrift("label_name", "L-infinity", label_distance, 0.1),))


def test_nothing_to_do_without_spans_or_when_the_newest_is_consumed():
    assert decide([], [], RULES).reason == "no span of data exists yet"
    done = decide([1, 2], [run(1), run(2, blessed=True, pushed_version="17")], RULES)
    assert (done.action, done.span) == ("skip", 2)
    assert "already trained by run run-2-complete (blessed, pushed version 17)" in done.reason


def test_a_new_span_trains_once_and_supersedes_older_unconsumed_ones():
    chosen = decide([1, 2, 3], [run(1)], RULES)
    assert (chosen.action, chosen.span, chosen.attempt) == ("train", 3, 1)
    assert "unconsumed older spans [2] are superseded" in chosen.reason


def test_a_running_span_is_not_started_again():
    chosen = decide([1], [run(1, "running", "r1")], RULES)
    assert (chosen.action, chosen.reason) == ("skip", "span 1 is being trained by run r1")


def test_failed_and_interrupted_runs_are_retried_up_to_max_attempts():
    retried = decide([1], [run(1, "failed"), run(1, "interrupted")], RULES)
    assert (retried.action, retried.attempt) == ("train", 3)
    assert "attempt 3 of 3" in retried.reason
    given_up = decide([1], [run(1, "failed", "a"), run(1, "failed", "b"), run(1, "interrupted", "c")], RULES)
    assert given_up.action == "skip"
    assert "failed 3 times (runs a, b, c)" in given_up.reason
    assert "hftfx run --set dataset.span=1" in given_up.reason


def test_drift_policy_trains_only_on_drift_and_says_by_how_much():
    rules = RetrainingConfig(policy="drift")
    calm = decide([1, 3], [run(1)], rules, lambda span: drift(0.02))
    assert calm.action == "skip"
    assert "has not drifted: label_name L-infinity 0.020 <= 0.1" in calm.reason
    shifted = decide([1, 3], [run(1)], rules, lambda span: drift(0.4))
    assert shifted.action == "train"
    assert "label_name L-infinity 0.400 > 0.1" in shifted.reason
    first = decide([1], [], rules, lambda span: None)
    assert first.action == "train" and "no blessed model yet" in first.reason


def test_drift_is_only_measured_for_a_span_that_could_be_trained():
    def must_not_run(span):
        raise AssertionError("drift measured for a consumed span")

    assert decide([1], [run(1)], RetrainingConfig(policy="drift"), must_not_run).action == "skip"


def test_a_decision_prints_its_action_reason_and_each_features_drift():
    chosen = decide([1, 3], [run(1, blessed=True)], RetrainingConfig(policy="drift"), lambda span: drift(0.25))
    lines = chosen.lines()
    assert lines[0] == "decision:  train span 3"
    assert lines[1].startswith("reason:    span 3 is new") and "label_name L-infinity 0.250 > 0.1" in lines[1]
    assert lines[2] == "drift:     span 3 vs the training data of blessed run run-1"
    assert lines[3].split() == ["label_name", "L-infinity", "0.2500", "threshold", "0.1", "DRIFT"]
    assert decide([], [], RULES).lines() == ["decision:  skip", "reason:    no span of data exists yet"]


def test_serving_drift_trains_a_new_span_only_once_the_served_traffic_drifted():
    rules = RetrainingConfig(policy="serving_drift", monitor_reports="/logs/monitor")
    served = [run(1, blessed=True, pushed_version="17")]
    asked = []

    def quiet(version):
        asked.append(version)

    first = decide([1], [], rules, served_drift=quiet)
    assert first.train and "no model served yet" in first.reason
    skipped = decide([1, 2], served, rules, served_drift=quiet)
    assert not skipped.train and "no drift in version 17's traffic" in skipped.reason and asked == ["17"]
    drifted = decide([1, 2], served, rules, served_drift=lambda version: "t.json: drift: script")
    assert drifted.train and drifted.span == 2
    assert "version 17's traffic drifted: t.json: drift: script" in drifted.reason
    assert not decide([1], served, rules, served_drift=lambda version: "drift").train  # no new labels: nothing trains


def test_serving_drift_needs_the_monitors_reports():
    with pytest.raises(ValueError, match=r"set retraining\.monitor_reports"):
        RetrainingConfig(policy="serving_drift")
