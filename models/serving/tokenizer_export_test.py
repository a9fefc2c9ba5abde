"""The export's tokenizer files, for every tokenizer family: written as the Trainer writes them (transformers 5's
save_pretrained leaves out the SentencePiece model), read back as the publisher reads them, the same ids; and a
break of them stopped by `hftfx run --check`, before any component runs."""

import os
from pathlib import Path

import pytest

from models.serving import tokenizer_export
from models.serving.tokenizer_export import TokenizerExportError, check_round_trip, save_tokenizer
from models.tokenizers.tokenizer import load_hf_tokenizer
from tests.model_families import EDGE_CASES, MULTILINGUAL, SENTENCEPIECE_FAMILIES, TOKENIZER_FAMILIES


@pytest.mark.parametrize("family", TOKENIZER_FAMILIES)
def test_every_family_reads_back_with_the_same_ids(family, family_model_dir, review_texts):
    check_round_trip(family_model_dir(family), review_texts[:200] + EDGE_CASES + MULTILINGUAL, 64)


@pytest.mark.parametrize("family", sorted(SENTENCEPIECE_FAMILIES))
def test_the_sentencepiece_model_is_carried_beside_what_transformers_writes(family, family_model_dir, tmp_path):
    model_file, _ = SENTENCEPIECE_FAMILIES[family]
    load_hf_tokenizer(family_model_dir(family)).save_pretrained(tmp_path / "transformers")
    assert model_file not in os.listdir(tmp_path / "transformers")  # why the export copies it
    save_tokenizer(family_model_dir(family), 64, tmp_path / "export")
    assert {model_file, "tokenizer.json", "tokenizer_config.json"} <= set(os.listdir(tmp_path / "export"))
    assert load_hf_tokenizer(tmp_path / "export").model_max_length == 64


def without_vocabulary_files(monkeypatch):
    """An export that writes the tokenizer's config alone (what a transformers release that stopped writing
    tokenizer.json, with no .model copied, would leave): nothing to read the vocabulary from."""
    real = tokenizer_export.save_tokenizer

    def broken(tokenizer_dir, max_seq_length, destination):
        real(tokenizer_dir, max_seq_length, destination)
        for path in Path(destination).iterdir():
            if path.name == "tokenizer.json" or path.suffix == ".model":
                path.unlink()

    monkeypatch.setattr(tokenizer_export, "save_tokenizer", broken)


def test_an_export_without_its_vocabulary_files_is_refused_by_the_round_trip(family_model_dir, monkeypatch):
    without_vocabulary_files(monkeypatch)
    with pytest.raises(TokenizerExportError, match=r"does not read back: .*has no vocabulary file"):
        check_round_trip(family_model_dir("xlm-roberta"), ["a film"], 64)


def test_an_export_giving_other_ids_is_refused_naming_the_text(family_model_dir, monkeypatch):
    """A read-back tokenizer that lower-cases where the folder's does not (one way an export can drift)."""
    folder = family_model_dir("roberta")
    real = tokenizer_export._ids
    calls = []

    def drifting(tokenizer_dir, texts):
        calls.append(tokenizer_dir)
        return real(tokenizer_dir, [t.lower() for t in texts] if len(calls) == 2 else texts)

    monkeypatch.setattr(tokenizer_export, "_ids", drifting)
    with pytest.raises(TokenizerExportError, match=r"other in-graph ids .* first 'Café crème"):
        check_round_trip(folder, [], 64)


def test_in_graph_ids_other_than_transformers_are_refused_even_when_both_reads_agree(family_model_dir, monkeypatch):
    """A tokenizer file the folder's and the export's in-graph tokenizers both read wrong (a vocab changed under
    the temp folder) gives the same wrong ids twice: only transformers' own ids show it."""
    real = tokenizer_export._ids

    def in_graph_lowered(tokenizer_dir, texts):
        return {**real(tokenizer_dir, texts), "in-graph": real(tokenizer_dir, [t.lower() for t in texts])["in-graph"]}

    monkeypatch.setattr(tokenizer_export, "_ids", in_graph_lowered)
    with pytest.raises(TokenizerExportError, match=r"in-graph tokenizer of .* other ids than transformers' .*'Café"):
        check_round_trip(family_model_dir("roberta"), [], 64)
