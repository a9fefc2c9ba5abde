import math

from benchmarks import encoders
from benchmarks.bench import _useful_forward_flops
from models.encoders import classifier
from models.hub.pretrained import packaged_model_dir

TINY_ULTRABERT = {  # vocabulary: one_width draws ids below 30,000
    **encoders.ULTRABERT_BASE, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 4, "sliding_window": 4, "vocab_size": 30522,
}  # fmt: skip


def test_a_long_width_step_is_measured_in_its_own_terms(monkeypatch):
    """What `make bench-encoders` runs per long shape and width, on a tiny UltraBERT: its model FLOP/s are the step's
    FLOPs over its seconds, counted from the family's own sizes."""
    monkeypatch.setitem(encoders.LONG_SHAPES, "tiny", TINY_ULTRABERT)
    result = encoders.one_width(24, 2, 1, "tiny")
    shape = classifier.encoder_shape(TINY_ULTRABERT, 2)
    flops = shape.training_flops(2, 2 * 24, 2 * 24 * 24)
    assert math.isclose(result["gflops"], flops / result["seconds"] / 1e9, rel_tol=1e-9)
    assert result["peak_gib"] > 0 and (result["width"], result["batch"]) == (24, 2)


def test_the_scorers_useful_flops_count_each_text_at_its_own_length():
    folder = packaged_model_dir("all-MiniLM-L6-v2")
    short, both = (_useful_forward_flops(folder, texts, 64) for texts in (["a film"], ["a film", "a long film"]))
    assert 0 < short < both < 3 * short
