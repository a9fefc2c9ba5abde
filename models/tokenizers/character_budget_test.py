"""Texts past the character budget: cut where the budget says, and tokenized as the model's own tokenizer
tokenizes them whole (id for id, every family), in bounded time however long the text."""

import time

import numpy as np
import pytest
import tensorflow as tf
from transformers import AutoTokenizer

from models.tokenizers.character_budget import CharacterBudget, cut_texts
from models.tokenizers.tokenizer import InGraphTokenizer, tokenizer_spec
from tests.model_families import TOKENIZER_FAMILIES, with_special_tokens


def cut(texts, head, tail=0):
    return [t.decode("utf-8", "replace") for t in cut_texts(tf.constant(texts), CharacterBudget(head, tail)).numpy()]


def test_whitespace_is_not_counted_and_short_texts_stay_whole():
    assert cut(["ab  cd ef", "abc", "", "   ", "a b"], 4) == ["ab  cd ", "abc", "", "   ", "a b"]
    assert cut(["one two three four"], 3, 4) == ["one  four"]  # the whitespace on both sides of the cut stays
    assert cut([" " * 1000 + "late start here"], 5) == [" " * 1000 + "late s"]


def test_whitespace_counts_where_the_family_makes_tokens_of_it():
    counted = CharacterBudget(4, counts_whitespace=True)
    texts = [" " * 1000 + "late", "ab  cd ef", "a b"]
    out = [t.decode() for t in cut_texts(tf.constant(texts), counted).numpy()]
    assert out == ["    ", "ab  ", "a b"]
    assert "whitespace counted" in counted.describe() and "not counted" in CharacterBudget(4).describe()


def test_characters_not_bytes_are_counted_and_bad_utf8_counts_one_each():
    assert cut(["日本語のテキストです"], 3, 2) == ["日本語です"]
    assert cut_texts(tf.constant([b"ab\xffcd\xfeef"]), CharacterBudget(3)).numpy().tolist() == [b"ab\xff"]


LONG_TEXTS = [
    "word " * 3000,
    " " * 20_000 + "a late start to a short review",
    "great\u3000" * 4000 + "but the ending",
    ("a review that goes on and on, " + "\n" * 50) * 400,
    "réalisation " * 2500,
]


@pytest.mark.parametrize("name", TOKENIZER_FAMILIES)
def test_long_texts_keep_the_tokens_the_model_tokenizer_gives_the_whole_text(family_model_dir, name):
    directory = family_model_dir(name)
    spec, hf = tokenizer_spec(directory), AutoTokenizer.from_pretrained(directory)
    tokenizer = InGraphTokenizer(spec, 32)
    assert all(len(t.replace(" ", "")) > tokenizer.character_budget.head for t in LONG_TEXTS[:1] + LONG_TEXTS[3:])
    ours = tokenizer(tf.constant(LONG_TEXTS))
    theirs = hf(LONG_TEXTS, padding="max_length", truncation=True, max_length=32)
    np.testing.assert_array_equal(ours["input_ids"].numpy(), np.array(theirs["input_ids"]))
    budget = 32 - spec.layout.special_count(False)
    whole = hf(LONG_TEXTS, add_special_tokens=False)["input_ids"]
    assert ours["truncated"].numpy().tolist() == [len(pieces) > budget for pieces in whole]
    head_tail = InGraphTokenizer(spec, 32, head_share=0.5)(tf.constant(LONG_TEXTS))["input_ids"].numpy()
    for row, pieces in zip(head_tail, whole, strict=True):
        kept = (
            pieces if len(pieces) <= budget else pieces[: budget // 2] + pieces[len(pieces) - (budget - budget // 2) :]
        )
        assert row.tolist()[: len(kept) + spec.layout.special_count(False)] == with_special_tokens(hf, kept)


def test_a_megabyte_word_costs_the_byte_level_bpe_what_its_budget_costs(family_model_dir):
    """One 1.4 MB word of random letters, no spaces: whole, byte-level BPE's merge rounds over it take minutes;
    cut (and merged in pieces of MAX_WORD_BYTES), about what its first budget's worth of letters takes. Both
    timed in this run: the ratio, not a wall time, is what is asserted."""
    import random

    from models.tokenizers.bpe_merges import MAX_WORD_BYTES, pieces_of_long_words

    spec = tokenizer_spec(family_model_dir("roberta"))
    tokenizer = InGraphTokenizer(spec, 64)
    rng = random.Random(0)
    letters = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(1_400_000))
    at_budget = tf.constant([letters[: tokenizer.character_budget.head]])
    tokenizer(at_budget)  # traces and warms the ops
    started = time.perf_counter()
    reference = tokenizer(at_budget)["input_ids"]
    budget_seconds = time.perf_counter() - started
    started = time.perf_counter()
    ids = tokenizer(tf.constant([letters]))["input_ids"]
    huge_seconds = time.perf_counter() - started
    np.testing.assert_array_equal(ids.numpy(), reference.numpy())
    assert huge_seconds < 10 * budget_seconds + 0.5, (huge_seconds, budget_seconds)
    words = tf.RaggedTensor.from_row_lengths(["a" * (MAX_WORD_BYTES * 2 + 3), "short"], [1, 1])
    pieces = pieces_of_long_words(words).to_list()
    assert pieces == [[b"a" * MAX_WORD_BYTES, b"a" * MAX_WORD_BYTES, b"aaa"], [b"short"]]


WHITESPACE_TEXTS = {"spaces": " ", "newlines": "\n", "NBSP": "\u00a0", "U+3000": "\u3000"}


@pytest.mark.parametrize("name", TOKENIZER_FAMILIES)
def test_a_megabyte_of_whitespace_is_bounded_in_every_family(family_model_dir, name):
    """1.4 MB of one whitespace character: byte-level BPE made 1.4 M tokens of it (18 s and 8 GB in one call at
    width 512); each family now tokenizes at most its budget's worth, within the ratio of the letters test above.
    The ids are HF's for the whole text, at the width."""
    spec = tokenizer_spec(family_model_dir(name))
    tokenizer = InGraphTokenizer(spec, 512)
    budget = tokenizer.character_budget.head
    for char in WHITESPACE_TEXTS.values():
        text = char * 1_400_000
        tokenizer(tf.constant([text[:budget]]))  # traces and warms the ops
        started = time.perf_counter()
        reference = tokenizer(tf.constant([text[:budget]]))
        budget_seconds = time.perf_counter() - started
        started = time.perf_counter()
        ours = tokenizer(tf.constant([text]))
        huge_seconds = time.perf_counter() - started
        assert huge_seconds < 10 * budget_seconds + 0.5, (repr(char), huge_seconds, budget_seconds)
        assert int(ours["token_count"].numpy()[0]) <= budget * len(char.encode())  # a token per byte at most
        np.testing.assert_array_equal(ours["input_ids"].numpy(), reference["input_ids"].numpy())
    hf = AutoTokenizer.from_pretrained(family_model_dir(name))
    # runs of whitespace between words, each within the bytes byte-level BPE merges whole (MAX_WORD_BYTES)
    texts = [(char * 80 + "late") * 30 + " start" for char in WHITESPACE_TEXTS.values()]
    theirs = hf(texts, padding="max_length", truncation=True, max_length=512)["input_ids"]
    np.testing.assert_array_equal(tokenizer(tf.constant(texts))["input_ids"].numpy(), np.array(theirs))
