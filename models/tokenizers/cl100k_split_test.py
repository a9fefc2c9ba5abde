import pytest
import tensorflow as tf
from tokenizers import Regex, pre_tokenizers

from models.tokenizers.cl100k_split import DIGITS_PATTERN, NUMBER_RUNS, PATTERN, split

TEXTS = [
    "In 2024, 1,234,567.89 people paid $12 for 3 tickets",
    "x\n\nb 'S \t(a  1234567 ",
    "٣٤٥٦ and ①② and ½¾ and ١٢٣٤٥٦٧",
    "a1b22c333d4444",
    "   99 bottles\r\n100",
]


@pytest.mark.parametrize("pattern", [PATTERN, DIGITS_PATTERN])
def test_the_split_makes_the_words_tokenizers_split_makes(pattern):
    """Llama-3's numbers in threes, and each digit alone (Qwen2's pattern), as `tokenizers`' Split (Isolated)."""
    expected = [
        [word for word, _ in pre_tokenizers.Split(Regex(pattern), "isolated").pre_tokenize_str(text)] for text in TEXTS
    ]
    words = split(tf.constant(TEXTS), NUMBER_RUNS[pattern]).to_list()
    assert [[w.decode() for w in row] for row in words] == expected
    if pattern == DIGITS_PATTERN:
        assert expected[3] == ["a", "1", "b", "2", "2", "c", "3", "3", "3", "d", "4", "4", "4", "4"]
