"""Model folders found where they are (packaged, local, a bucket) and bad ones named clearly."""

import shutil

import pytest
import tensorflow as tf

from models.encoders.from_folder import build_classifier, read_model_folder
from models.hub.pretrained import ModelFilesError, read_config, resolve_model_dir, weights_file


def test_packaged_model_resolves_to_the_shipped_directory(packaged_model_dir):
    assert resolve_model_dir("packaged:all-MiniLM-L6-v2") == packaged_model_dir
    assert (packaged_model_dir / "model.safetensors").is_file()


@pytest.mark.parametrize(
    ("removed", "message"),
    [("config.json", "config.json"), ("model.safetensors", "pretrained weights")],
)
def test_incomplete_model_directory_names_what_is_missing(packaged_model_dir, tmp_path, removed, message):
    copy = tmp_path / "model"
    shutil.copytree(packaged_model_dir, copy)
    (copy / removed).unlink()
    with pytest.raises(ModelFilesError, match=message):
        read_config(copy) if removed == "config.json" else weights_file(copy)


def test_a_folder_without_its_config_is_refused_naming_the_missing_weights_too(packaged_model_dir, tmp_path):
    """A reader that does not want the weights yet still hears, in the one refusal, every file the folder lacks."""
    copy = shutil.copytree(packaged_model_dir, tmp_path / "model")
    (copy / "config.json").unlink()
    (copy / "model.safetensors").unlink()
    with pytest.raises(ModelFilesError, match=r"lacks: config\.json .*; model\.safetensors \(pretrained weights\)"):
        read_config(copy)


def test_a_model_folder_in_a_bucket_is_copied_through_tfs_filesystems(tiny_bert_dir, tmp_path):
    """ram:// is TensorFlow's in-memory filesystem: a non-local one, reached by the same tf.io.gfile calls as
    gs://. Only what fine-tuning reads is copied; without weights (compile's checks), no weights."""

    bucket = f"ram://{tmp_path.name}/models/tiny"
    tf.io.gfile.makedirs(bucket)
    for path in tiny_bert_dir.iterdir():
        tf.io.gfile.copy(str(path), f"{bucket}/{path.name}")
    tf.io.gfile.copy(str(tiny_bert_dir / "config.json"), f"{bucket}/notes.bin")  # not a model file

    copied = resolve_model_dir(bucket + "/")
    checks_only = resolve_model_dir(bucket, weights=False)

    assert sorted(p.name for p in copied.iterdir()) == sorted(p.name for p in tiny_bert_dir.iterdir())
    assert (copied / "model.safetensors").read_bytes() == (tiny_bert_dir / "model.safetensors").read_bytes()
    assert not (checks_only / "model.safetensors").exists() and (checks_only / "config.json").is_file()
    build_classifier(read_model_folder(copied), ["rotten", "fresh"])  # what the Trainer does with it
    parent = bucket.rsplit("/", 1)[0]
    with pytest.raises(ModelFilesError, match=r"has no config.json: name the folder that save_pretrained wrote"):
        resolve_model_dir(parent)  # the folder above the model


def test_an_unreadable_bucket_names_the_identity_it_needs():
    with pytest.raises(ModelFilesError, match=r"gs://hftfx-no-such-bucket/model.*(objectViewer|no config.json)"):
        resolve_model_dir("gs://hftfx-no-such-bucket/model")


def test_a_bucket_copy_fetches_the_named_files_at_the_top_level_only(tmp_path, tiny_bert_dir, monkeypatch):
    """file:// is TF's local filesystem behind the same copy a gs:// folder gets: the config, tokenizer files and
    weights are copied; a subfolder's files, stray JSON and a file over its kind's cap are not."""
    from models.errors import UserError
    from models.hub import pretrained

    folder = shutil.copytree(tiny_bert_dir, tmp_path / "bucket" / "model")
    (folder / "nested").mkdir()
    (folder / "nested" / "config.json").write_text("{}")
    (folder / "training_args.json").write_text("{}")
    copied = pretrained.resolve_model_dir(f"file://{folder}")
    names = {p.relative_to(copied).as_posix() for p in copied.rglob("*") if p.is_file()}
    assert {"config.json", "tokenizer.json", "model.safetensors"} <= names
    assert not names & {"nested/config.json", "training_args.json"}
    monkeypatch.setattr(pretrained, "MAX_FILE_BYTES", 1000)
    with pytest.raises(UserError, match=r"/model/\w+\.(json|txt) is [\d,]+ bytes, over the 1,000 a file of its kind"):
        pretrained.resolve_model_dir(f"file://{folder}/", weights=False)


def test_a_sentence_transformers_folder_in_a_bucket_brings_the_modules_it_names(tmp_path, tiny_bert_dir):
    """What a cloud warm start reads: the blessed export of a mean-pooling head, copied from its bucket with the
    module folders its modules.json names (the pooling, the head's dense layers), and no other subfolder."""
    from models.serving.hf_export import save_hf_format

    model, _ = build_classifier(read_model_folder(tiny_bert_dir, pooling="mean"), ["rotten", "fresh"])
    export = tmp_path / "bucket" / "Format-HF"
    save_hf_format(model, tiny_bert_dir, 32, str(export))
    (export / "nested").mkdir()
    (export / "nested" / "config.json").write_text("{}")

    copied = resolve_model_dir(f"file://{export}")

    folder = read_model_folder(copied)
    assert folder.pooling.pooling == "mean" and not (copied / "nested").exists()
    assert build_classifier(folder, ["rotten", "fresh"])[1].missing == ()  # the head read back from 2_Dense, 3_Dense
