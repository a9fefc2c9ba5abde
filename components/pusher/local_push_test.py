"""Versions appear whole or not at all; two pushes into one serving directory never mix; only leftovers of
pushes that provably died are cleared."""

import os
import subprocess
import sys
from pathlib import Path

from components.pusher.local_push import PUSH_LOCK, STAGING_PREFIX, next_version, push_atomically

ROOT = Path(__file__).resolve().parents[1]


def _model(tmp_path):
    model = tmp_path / "model"
    (model / "variables").mkdir(parents=True)
    (model / "saved_model.pb").write_bytes(b"graph")
    (model / "variables" / "variables.index").write_bytes(b"index")
    return model


def test_push_lands_a_complete_numbered_version(tmp_path):
    base = tmp_path / "serving" / "m"
    destination, version = push_atomically(str(_model(tmp_path)), str(base))
    assert version.isdigit() and destination == os.path.join(base, version)
    assert (base / version / "saved_model.pb").read_bytes() == b"graph"
    assert (base / version / "variables" / "variables.index").exists()
    assert sorted(os.listdir(base)) == sorted([version, PUSH_LOCK])


def test_versions_only_grow_even_within_the_same_second(tmp_path):
    base = tmp_path / "m"
    (base / "2000000000").mkdir(parents=True)
    assert next_version(str(base), now=1_900_000_000) == "2000000001"
    assert next_version(str(base), now=2_100_000_000) == "2100000000"


def test_a_partial_push_left_by_a_crash_is_removed_and_never_visible(tmp_path):
    base = tmp_path / "m"
    (base / "1700000000").mkdir(parents=True)
    partial = base / f"{STAGING_PREFIX}1700000050"
    (partial / "variables").mkdir(parents=True)
    (partial / "variables" / "variables.data").write_bytes(b"half")
    _, version = push_atomically(str(_model(tmp_path)), str(base))
    assert sorted(os.listdir(base)) == sorted(["1700000000", version, PUSH_LOCK])


def test_only_staging_whose_push_died_is_cleared_whatever_host_or_pid_namespace(tmp_path):
    """Liveness is the lock beside each staging folder, not a hostname and pid (containers share a hostname
    but not a pid namespace): a push whose process died left its lock free; a live one, from this process or
    any other, holds it; a folder without a lock is not provably dead."""
    import fcntl

    from components.pusher.local_push import STAGING_LOCK_SUFFIX

    base = tmp_path / "m"
    names = {
        "dead": f"{STAGING_PREFIX}0123456789abcdef0123456789abcdef",
        "live": f"{STAGING_PREFIX}fedcba9876543210fedcba9876543210",
        "unlocked": f"{STAGING_PREFIX}serving-node-7-1-0123456789ab",  # the former layout: can't tell, kept
    }
    for name in names.values():
        (base / name).mkdir(parents=True)
    died = "import fcntl, sys; fcntl.flock(open(sys.argv[1], 'a'), fcntl.LOCK_EX)"  # then exits without unlocking
    lock = str(base / (names["dead"] + STAGING_LOCK_SUFFIX))
    subprocess.run([sys.executable, "-c", died, lock], check=True)
    with open(base / (names["live"] + STAGING_LOCK_SUFFIX), "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # a push under way (its copy running)
        _, version = push_atomically(str(_model(tmp_path)), str(base))
        assert sorted(os.listdir(base)) == sorted(
            [version, PUSH_LOCK, names["live"], names["live"] + STAGING_LOCK_SUFFIX, names["unlocked"]]
        )


_PUSH = """
import sys, time
from pathlib import Path
from components.pusher import local_push as pusher
pusher.time.time = lambda: 1_800_000_000.5  # both runs push within the same second
start = Path(sys.argv[3])
while not start.exists():
    time.sleep(0.001)
print(pusher.push_atomically(sys.argv[1], sys.argv[2])[1])
"""


def test_two_runs_pushing_in_the_same_second_get_two_complete_versions(tmp_path):
    """Two processes (two pipeline roots' Pushers) released at once into one serving directory."""
    base, start = tmp_path / "serving" / "m", tmp_path / "go"
    models = []
    for run in ("a", "b"):
        model = _model(tmp_path / run)
        (model / "variables" / "variables.data").write_bytes(run.encode() * 2_000_000)  # a copy that takes a while
        (model / "saved_model.pb").write_bytes(f"graph of {run}".encode())
        models.append(model)
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", _PUSH, str(m), str(base), str(start)], cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
        for m in models
    ]
    start.touch()
    versions = [r.communicate(timeout=120)[0].strip() for r in runs]

    assert sorted(versions) == ["1800000000", "1800000001"]
    assert sorted(os.listdir(base)) == sorted([*versions, PUSH_LOCK])  # no staging left
    for version, run in zip(versions, ("a", "b"), strict=True):
        assert (base / version / "saved_model.pb").read_bytes() == f"graph of {run}".encode()
        assert (base / version / "variables" / "variables.data").read_bytes() == run.encode() * 2_000_000
