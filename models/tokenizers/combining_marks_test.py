"""Runs of combining marks are cut at UAX #15's 30 non-starters before normalization; every other text is kept
byte for byte, so its ids stay transformers' own."""

import unicodedata

import pytest
import tensorflow as tf
from transformers import AutoTokenizer

from models.tokenizers.combining_marks import MAX_NON_STARTERS, limit_combining_runs, non_starter_ranges
from models.tokenizers.tokenizer import InGraphTokenizer, tokenizer_spec
from tests.model_families import EDGE_CASES, MULTILINGUAL

ACUTE, GRAVE_BELOW, ZWJ = "\u0301", "\u0316", "\u200d"


def _limited(texts):
    return [text.decode("utf-8", "replace") for text in limit_combining_runs(tf.constant(texts)).numpy()]


def test_the_table_is_every_code_point_with_a_combining_class():
    firsts, lasts = non_starter_ranges()
    inside = {point for first, last in zip(firsts, lasts, strict=True) for point in range(first, last + 1)}
    assert inside == {point for point in range(0x110000) if unicodedata.combining(chr(point))}


def test_texts_without_a_long_run_are_kept_byte_for_byte(review_texts):
    texts = [*review_texts[:500], *EDGE_CASES, *MULTILINGUAL, "a" + ACUTE * MAX_NON_STARTERS, "\u0915\u094d" * 40]
    encoded = [text.encode("utf-8") for text in texts] + [b"\xff\xfe invalid", b""]
    assert limit_combining_runs(tf.constant(encoded)).numpy().tolist() == encoded


def test_each_run_keeps_its_first_30_marks_in_its_own_text():
    texts = [
        "a" + ACUTE * 40 + GRAVE_BELOW * 40 + "b" + GRAVE_BELOW * 31,  # one run of 80, then one of 31
        ACUTE * 35,  # a run at the text's start
        "x" + ACUTE * 29,
        ACUTE * 20,  # continues no run of the text before it
        "e" + ACUTE * 15 + ZWJ + ACUTE * 20,  # a starter between marks ends the run
    ]
    assert _limited(texts) == [
        "a" + ACUTE * 30 + "b" + GRAVE_BELOW * 30,
        ACUTE * 30,
        "x" + ACUTE * 29,
        ACUTE * 20,
        "e" + ACUTE * 15 + ZWJ + ACUTE * 20,
    ]


@pytest.mark.parametrize("marks", [MAX_NON_STARTERS, MAX_NON_STARTERS + 1, 1_000])
def test_ids_past_the_limit_are_those_of_the_text_with_the_limit(packaged_model_dir, marks):
    """BERT strips accents, so for MiniLM the cut changes no id at all: transformers' ids of the whole text."""
    spec = tokenizer_spec(packaged_model_dir)
    text = "caf" + "e" + ACUTE * marks + GRAVE_BELOW * marks + " au lait"
    ours = InGraphTokenizer(spec, 32)(tf.constant([text]))["input_ids"].numpy().tolist()
    hf = AutoTokenizer.from_pretrained(packaged_model_dir)
    assert ours == hf([text], padding="max_length", truncation=True, max_length=32)["input_ids"]
