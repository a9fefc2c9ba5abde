"""Versions appear whole or not at all; leftovers of an interrupted push are cleared."""

import os

from components.pusher import STAGING_PREFIX, next_version, push_atomically


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
    assert os.listdir(base) == [version]


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
    assert sorted(os.listdir(base)) == sorted(["1700000000", version])
