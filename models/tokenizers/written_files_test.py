"""Files built from tokenizer.json live in this user's own folder and are used again only while they hold what would
be written: a file planted under the predictable name never changes the ids."""

import os
import shutil
import tempfile
from pathlib import Path

import pytest
import tensorflow as tf
from transformers import AutoTokenizer

from models.tokenizers import tokenizer, written_files
from models.tokenizers.tokenizer import InGraphTokenizer, tokenizer_spec


@pytest.fixture
def temp_root(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_a_file_already_there_is_used_only_when_it_holds_the_content(temp_root):
    first = written_files.content_named_file(b"[PAD]\ngood\nbad\n", "hftfx-vocab-", ".txt")
    assert first.parent == temp_root / f"hftfx-{os.getuid()}"
    assert oct(first.parent.stat().st_mode & 0o777) == oct(0o700)
    first.write_bytes(b"[PAD]\nbad\ngood\n")  # planted: the same name, two words swapped
    again = written_files.content_named_file(b"[PAD]\ngood\nbad\n", "hftfx-vocab-", ".txt")
    assert again == first and again.read_bytes() == b"[PAD]\ngood\nbad\n"
    assert [path.name for path in first.parent.iterdir()] == [first.name]  # no staging file left behind


def test_a_link_planted_under_the_name_is_replaced_not_followed(temp_root):
    path = written_files.content_named_file(b"a\nb\n", "hftfx-vocab-", ".txt")
    target = temp_root / "elsewhere.txt"
    target.write_bytes(b"a\nb\n")
    path.unlink()
    path.symlink_to(target)
    assert written_files.content_named_file(b"a\nb\n", "hftfx-vocab-", ".txt") == path
    assert not path.is_symlink() and target.read_bytes() == b"a\nb\n"


@pytest.mark.parametrize(
    "make_unsafe, named",
    [
        (lambda folder: folder.chmod(0o777), "may be written by others"),
        (lambda folder: os.chown(folder, os.getuid() + 1, -1), "belongs to user"),
        (lambda folder: (folder.rmdir(), folder.symlink_to(folder.parent)), "is not a folder"),
    ],
)
def test_a_folder_others_control_is_refused_naming_the_fix(temp_root, make_unsafe, named):
    folder = written_files.private_folder()
    make_unsafe(folder)
    with pytest.raises(written_files.UnsafeTempFolder, match=f"{named}.*TMPDIR"):
        written_files.content_named_file(b"x\n", "hftfx-vocab-", ".txt")


def test_a_planted_vocab_does_not_change_the_in_graph_ids(temp_root, tmp_path, packaged_model_dir):
    """A WordPiece folder saved as transformers 5 saves it (tokenizer.json alone): its vocab file is written under
    the temp folder. One planted there first, with "good" and "bad" swapped, is not read."""
    folder = tmp_path / "model"
    folder.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(packaged_model_dir / name, folder / name)
    vocab = tokenizer_spec(folder).pieces.vocab_path
    lines = Path(vocab).read_text(encoding="utf-8").split("\n")
    good, bad = lines.index("good"), lines.index("bad")
    lines[good], lines[bad] = "bad", "good"
    Path(vocab).write_text("\n".join(lines), encoding="utf-8")
    tokenizer._read_tokenizer_spec.cache_clear()  # as a new process reads the folder
    texts = ["a good film", "a bad film"]
    ours = InGraphTokenizer(tokenizer_spec(folder), 16)(tf.constant(texts))["input_ids"].numpy().tolist()
    theirs = AutoTokenizer.from_pretrained(folder)(texts, padding="max_length", max_length=16)["input_ids"]
    assert ours == theirs
