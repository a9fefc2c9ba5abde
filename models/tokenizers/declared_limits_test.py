"""Each tokenizer.json past a stated bound is refused with one line naming the file, the value and the bound, before
transformers reads it; real tokenizers of every family pass."""

import json
import re
import shutil

import pytest

from models.errors import UserError
from models.tokenizers import declared_limits
from models.tokenizers.declared_limits import TokenizerLimitError
from models.tokenizers.tokenizer import tokenizer_spec
from tests.model_families import TOKENIZER_FAMILIES


@pytest.mark.parametrize("family", TOKENIZER_FAMILIES)
def test_every_family_is_within_the_bounds(family, family_model_dir):
    folder = family_model_dir(family)  # gemma's and llama-3's hold a tokenizer alone: no vocab_size to check
    config = json.loads((folder / "config.json").read_text()) if (folder / "config.json").is_file() else {}
    declared_limits.read_checked(folder / "tokenizer.json", config.get("vocab_size"))


def test_the_packaged_model_is_within_the_bounds(packaged_model_dir):
    assert tokenizer_spec(packaged_model_dir).budget_note() == ""


def _changed(folder, tmp_path, change) -> object:
    copy = tmp_path / "model"
    shutil.copytree(folder, copy)
    (copy / "vocab.txt").unlink(missing_ok=True)  # tokenizer.json alone, as transformers 5 saves it
    declared = json.loads((copy / "tokenizer.json").read_text(encoding="utf-8"))
    tokenizer_config = change(declared)  # a change may also set tokenizer_config.json's keys
    (copy / "tokenizer.json").write_text(json.dumps(declared), encoding="utf-8")
    if tokenizer_config:
        settings = json.loads((copy / "tokenizer_config.json").read_text(encoding="utf-8"))
        (copy / "tokenizer_config.json").write_text(json.dumps({**settings, **tokenizer_config}), encoding="utf-8")
    return copy


def _refused(folder) -> str:
    """What reading `folder`'s tokenizer as --check reads it (tokenizer_spec) refuses, as the one line the user sees
    (tests/bad_input_test.py runs one such folder through `hftfx run --check`: exit 2)."""
    with pytest.raises(UserError) as refused:
        tokenizer_spec(folder)
    return str(refused.value)


def _long_entry(declared):
    declared["model"]["vocab"]["x" * 1_000_000] = len(declared["model"]["vocab"])


def _huge_id(declared):
    declared["model"]["vocab"]["zzz"] = 4_000_000_000


def _past_vocab_size(declared):
    declared["added_tokens"].append({"id": 30_522, "content": "[NEW]", "special": True, "single_word": False,
                                     "lstrip": False, "rstrip": False, "normalized": False})  # fmt: skip


def _long_words(declared):
    declared["model"]["max_input_chars_per_word"] = 10_000_000


def _no_unk(declared):
    del declared["model"]["vocab"]["[UNK]"]


def _many_specials(declared):
    sep = {"SpecialToken": {"id": "[SEP]", "type_id": 0}}
    declared["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"Sequence": {"id": "A", "type_id": 0}}] + [sep] * 600,
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, sep, {"Sequence": {"id": "B", "type_id": 1}}, sep],
        "special_tokens": {"[SEP]": {"id": "[SEP]", "ids": [102], "tokens": ["[SEP]"]}},
    }
    # transformers' BertTokenizer writes its own post-processor; the generic class keeps the file's, as
    # ModernBERT's and other PreTrainedTokenizerFast folders do
    return {"tokenizer_class": "PreTrainedTokenizerFast"}


def _many_entries(declared):
    vocab = declared["model"]["vocab"]
    vocab.update({f"w{i}": len(vocab) + i for i in range(declared_limits.MAX_VOCAB_ENTRIES)})


@pytest.mark.parametrize(
    "change, message",
    [
        (_long_entry, r"the entry of id 30522 is 1,000,000 characters, over the 1,024 one token can hold"),
        (_huge_id, r"'zzz' has id 4000000000, outside 0..30,521 \(config.json's vocab_size\)"),
        (_past_vocab_size, r"'\[NEW\]' has id 30522, outside 0..30,521 \(config.json's vocab_size\)"),
        (_long_words, r"max_input_chars_per_word 10000000 is outside 1..1,000"),
        (_no_unk, r"the WordPiece unk_token '\[UNK\]' is not in its vocab"),
        (_many_specials, r"declares 600 special tokens its post-processor puts around a text, over the 16"),
        (_many_entries, r"declares 1,079,098 vocab entries, over the 1,048,576"),
    ],
)
def test_a_tokenizer_json_past_a_bound_is_refused_naming_file_value_and_bound(change, message, tiny_bert_dir, tmp_path):
    folder = _changed(tiny_bert_dir, tmp_path, change)
    error = _refused(folder)
    assert f"{folder / 'tokenizer.json'}" in error
    assert re.search(message, error), error


def test_a_file_past_the_size_bound_is_not_parsed(tmp_path, monkeypatch):
    path = tmp_path / "tokenizer.json"
    path.write_text("{" + " " * 2_000 + "}")
    monkeypatch.setattr(declared_limits, "MAX_FILE_BYTES", 1_000)
    with pytest.raises(TokenizerLimitError, match=r"is 2,002 bytes, over the 1,000 a tokenizer.json can need"):
        declared_limits.read_checked(path, None)


def test_a_longer_entry_within_the_bounds_is_counted_at_the_cap_and_said(tiny_bert_dir, tmp_path):
    def long_entry(declared):
        declared["model"]["vocab"]["-" * 500] = 30_521  # replaces the last entry's place
        del declared["model"]["vocab"][next(t for t, i in declared["model"]["vocab"].items() if i == 30_521)]

    spec = tokenizer_spec(_changed(tiny_bert_dir, tmp_path, long_entry))
    assert (spec.token_chars, spec.longest_token_chars) == (128, 500)
    assert spec.budget_note() == "its longest vocab entry is 500 characters; texts are cut counting at most 128 a token"


def test_a_normalizer_regex_re2_cannot_compile_is_named_not_a_traceback(family_model_dir, tmp_path):
    """Oniguruma (what tokenizers runs) takes a backreference; RE2, TensorFlow's engine, does not: the regex is
    named when the spec is read instead of failing at the first text in the graph."""
    def backreference(declared):
        declared["normalizer"] = {
            "type": "Sequence",
            "normalizers": [{"type": "Replace", "pattern": {"Regex": "(a)\\1"}, "content": "a"}],
        }
        return {"tokenizer_class": "PreTrainedTokenizerFast"}

    error = _refused(_changed(family_model_dir("xlm-roberta"), tmp_path, backreference))
    assert "normalizer Replace with the regex '(a)\\\\1', which RE2 cannot compile" in error, error
