"""Every code point gets Hugging Face's ids in-graph, and the disagreement table matches the installed libraries."""

import numpy as np
import pytest
import tensorflow as tf
from transformers import AutoTokenizer

from models.tokenizers import tokenizer as in_graph
from models.tokenizers import unicode_compat, wordpiece


@pytest.fixture(scope="module")
def hf_tokenizer(packaged_model_dir):
    return AutoTokenizer.from_pretrained(packaged_model_dir)


def test_table_matches_the_installed_tokenizers_and_tensorflow():
    derived = unicode_compat.derive_disagreements(wordpiece.clean_and_fold, wordpiece.split_words)
    assert derived == unicode_compat.DISAGREEMENTS, (
        "regenerate with: bin/in-env python -m models.tokenizers.unicode_table"
    )
    assert set(derived) <= set(unicode_compat.TREATMENTS)


@pytest.mark.slow
@pytest.mark.parametrize("cased", [False, True], ids=["uncased", "cased"])
def test_every_code_point_inside_a_word_gets_hf_ids(packaged_model_dir, cased):
    """'a<c>b' for all 1.1M code points: the character is dropped, spaced, stripped, split or kept as HF does."""
    options = {"do_lower_case": False, "strip_accents": False} if cased else {}
    hf_tokenizer = AutoTokenizer.from_pretrained(packaged_model_dir, **options)
    spec = in_graph.tokenizer_spec(packaged_model_dir)
    if cased:
        pieces = in_graph.dataclasses.replace(spec.pieces, lower_case=False, strip_accents=False)
        spec = in_graph.dataclasses.replace(spec, pieces=pieces)
    tokenizer = in_graph.InGraphTokenizer(spec, 8)
    texts = [f"a{chr(p)}b" for p in range(0x110000) if not 0xD800 <= p < 0xE000]
    differing = []
    for start in range(0, len(texts), 100_000):
        batch = texts[start : start + 100_000]
        ours = tokenizer(tf.constant(batch))["input_ids"].numpy()
        theirs = np.array(hf_tokenizer(batch, padding="max_length", truncation=True, max_length=8)["input_ids"])
        differing += [f"U+{ord(batch[i][1]):04X}" for i in np.where((ours != theirs).any(axis=1))[0]]
    assert not differing, f"{len(differing)} code points differ: {differing[:20]}"


def test_rewritten_characters_are_tokenized_as_hf_does_in_context(hf_tokenizer, packaged_model_dir):
    spec = in_graph.tokenizer_spec(packaged_model_dir)
    texts = [
        "Quranic mark\u08d3 inside a word",  # a mark to TF, a letter to HF
        "new punctuation\u2e52here",  # punctuation to TF, a letter to HF
        "extension ideograph \U0002b820\U0002b821 pair",  # CJK to TF, a letter to HF
        "format\u0890char",  # dropped by TF, kept by HF
        "Hanunoo\u1734sign",  # Mc to TF, an accent HF strips
        "Ogham\u166dmark",  # a symbol to TF, punctuation to HF
    ]
    ours = in_graph.InGraphTokenizer(spec, 24)(tf.constant(texts))["input_ids"].numpy()
    theirs = np.array(hf_tokenizer(texts, padding="max_length", truncation=True, max_length=24)["input_ids"])
    np.testing.assert_array_equal(ours, theirs)


def test_placeholder_avoids_characters_of_the_vocab():
    assert unicode_compat.placeholder_for(["a", "##b"]) == unicode_compat.PLACEHOLDER_CANDIDATES[0]
    first = unicode_compat.PLACEHOLDER_CANDIDATES[0]
    assert unicode_compat.placeholder_for(["a", f"x{first}y"]) == unicode_compat.PLACEHOLDER_CANDIDATES[1]
    with pytest.raises(ValueError, match="PLACEHOLDER_CANDIDATES"):
        unicode_compat.placeholder_for(list(unicode_compat.PLACEHOLDER_CANDIDATES))


def test_vocab_characters_in_disagreement_are_named():
    assert unicode_compat.vocab_characters_in_disagreement(["plain", "##\u08d3x"]) == {"\u08d3"}
    assert not unicode_compat.vocab_characters_in_disagreement(["plain", "words"])
