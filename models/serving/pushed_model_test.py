"""How `hftfx predict` reads sentence pairs and shows predictions, without a model."""

import pytest

from models.serving.pushed_model import Prediction, prediction_lines, split_pairs
from models.serving.tf_serving import BadRequestError


def test_pairs_split_at_the_first_separator_and_a_line_without_one_is_refused():
    assert split_pairs(["a\tb", "c\td\te"], "\t", "m") == (["a", "c"], ["b", "d\te"])
    with pytest.raises(BadRequestError, match=r"serving/m classifies sentence pairs: .*'\\t'.*--pair-separator"):
        split_pairs(["a\tb", "no pair here"], "\t", "serving/m")


def test_predictions_show_label_confidence_probabilities_and_the_shortened_texts():
    single = Prediction("x" * 80, "fresh", 1, 0.912, (0.088, 0.912))
    pair = Prediction("first text", "entailment", 0, 0.5, (0.5, 0.3, 0.2), text_pair="y" * 40)
    lines = prediction_lines([single, pair])
    assert lines[0] == "  fresh        91.2%  [0.09  0.91]  " + "x" * 67 + "..."
    assert lines[1] == "  entailment   50.0%  [0.50  0.30  0.20]  first text  |  " + "y" * 31 + "..."


def test_the_tf_serving_text_ops_are_registered_by_the_installed_tensorflow_text():
    """TF Serving's op list (its pinned tensorflow_text's ops_lib) is what the installed tensorflow_text registers
    too, and it is more than core TensorFlow: an export using any of them loads in both."""
    from tensorflow.python.framework import op_def_registry

    from models.serving import tf_serving

    assert all(op_def_registry.get(op) is not None for op in tf_serving.TEXT_OPS_IN_TF_SERVING)
    assert not any(tf_serving.is_core_op(op) for op in tf_serving.TEXT_OPS_IN_TF_SERVING)
    assert tf_serving.unsupported_ops({"SentencepieceTokenizeOp", "MatMul"}) == []
    assert tf_serving.unsupported_ops({"SomeCustomOp"}) == ["SomeCustomOp"]


def test_only_complete_versions_are_served_or_copied(tmp_path):
    """A version without its saved_model.pb (a push in flight or cut off) is passed over, locally and through
    TF's filesystems (a file:// URI stands for gs://); none complete is refused naming the versions."""
    from models.serving.pushed_model import newest_complete_version, resolve_version_dir

    for version in ("1", "2", "10"):
        (tmp_path / version).mkdir()
    (tmp_path / "1" / "saved_model.pb").write_bytes(b"")
    (tmp_path / "2" / "saved_model.pb").write_bytes(b"")
    (tmp_path / "10" / "variables").mkdir()  # the push of version 10 is still writing
    assert resolve_version_dir(tmp_path) == tmp_path / "2"
    assert newest_complete_version(f"file://{tmp_path}") == f"file://{tmp_path}/2"
    assert newest_complete_version(str(tmp_path / "1")) == str(tmp_path / "1")
    (tmp_path / "1" / "saved_model.pb").unlink()
    (tmp_path / "2" / "saved_model.pb").unlink()
    with pytest.raises(FileNotFoundError, match=r"version folders \['1', '2', '10'\] but none with its saved_model"):
        resolve_version_dir(tmp_path)


def test_object_names_that_would_land_outside_the_copy_are_refused(tmp_path):
    from models.errors import UserError
    from models.hub.remote_folder import _inside, localize

    (tmp_path / "variables").mkdir()
    (tmp_path / "saved_model.pb").write_bytes(b"graph")
    (tmp_path / "variables" / "variables.index").write_bytes(b"index")
    copy = localize(f"file://{tmp_path}")  # a folder through TF's filesystems, as from gs://
    assert sorted(str(p.relative_to(copy)) for p in copy.rglob("*")) == [
        "saved_model.pb",
        "variables",
        "variables/variables.index",
    ]

    assert _inside("variables/variables.index", "gs://b/m") == "variables/variables.index"
    for name in ("../../etc/cron.d/x", "/etc/passwd", "a/../../b", "./."):
        with pytest.raises(UserError, match="would be copied outside the folder"):
            _inside(name, "gs://b/m")
