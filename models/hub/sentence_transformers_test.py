"""A sentence-transformers folder's pooling as its modules.json and 1_Pooling/config.json declare it, in the legacy
flags (every release to 5.x) and 6.x's `pooling_mode`; anything we do not pool alike declares nothing."""

import json

import pytest

from models.hub.sentence_transformers import declared_pooling


def _folder(tmp_path, pooling: dict, modules=None):
    entries = modules or [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    (tmp_path / "modules.json").write_text(json.dumps(entries))
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    return tmp_path


@pytest.mark.parametrize(
    ("pooling", "expected"),
    [
        ({"pooling_mode_mean_tokens": True, "pooling_mode_cls_token": False}, "mean"),
        ({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}, "cls"),
        ({"pooling_mode": "mean"}, "mean"),
        ({"pooling_mode": ["cls"]}, "cls"),
        ({"pooling_mode_max_tokens": True}, None),
        ({"pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": True}, None),  # two at once: not one head's
        ({"pooling_mode": "lasttoken"}, None),
    ],
)
def test_the_declared_pooling_is_read_in_every_releases_keys(tmp_path, pooling, expected):
    assert declared_pooling(_folder(tmp_path, pooling)) == expected


def test_a_folder_without_modules_or_with_a_broken_one_declares_nothing(tmp_path):
    assert declared_pooling(tmp_path) is None
    (tmp_path / "modules.json").write_text("{not json")
    assert declared_pooling(tmp_path) is None


def test_the_packaged_minilm_declares_mean(packaged_model_dir):
    assert declared_pooling(packaged_model_dir) == "mean"
