"""How far two float32 answers of one classifier may differ when only the shapes of the computation differ.

serving_default runs a request shortest text first, in chunks of up to 32 rows padded to their longest text
(models/serving/signatures.py); batch scoring, a REST call and a tf.Example call put the same text in other chunks, at
other widths and row counts. Padding is masked, so the answers are equal in exact arithmetic, but the CPU's
kernels (oneDNN / Eigen block by shape and by instruction set: AVX2, AVX-512 and AMX differ) sum the same
products in another order. Higham's bound for a sum of n products in any order is n·u relative to the sum of
their magnitudes (u = 2^-24 in float32); LayerNorm keeps an encoder's activations near unit scale, so along the
chain of sums from the embeddings to a logit the first-order errors add up to u times the chain's total length.
Two computations differ by at most twice that, and softmax moves a probability by at most half of the largest
change of a logit: the bound on a probability is u times the chain's length.

The bound sits between the two things it must tell apart: on an encoder whose answers move with its texts,
reordering alone moved probabilities by 1e-7 and unmasked padding by 3e-2, against a bound of 1e-4
(models/serving/signatures_test.py); the e2e tests show one weight changed and truncated texts outside it as well.
"""

from __future__ import annotations

import json
from pathlib import Path

FLOAT32_UNIT_ROUNDOFF = 2.0**-24


def summed_terms_to_a_logit(config: dict, width: int) -> int:
    """The lengths of the sums a BERT-style encoder + pooler + classifier evaluates one after another on the way
    to a logit, added up (parallel sums, such as Q, K and V, counted once)."""
    hidden, inner = config["hidden_size"], config["intermediate_size"]
    head = hidden // config["num_attention_heads"]
    layer_norm = 2 * hidden  # a mean and a variance
    per_layer = (
        hidden  # Q, K, V projections
        + head  # attention scores
        + 2 * width  # softmax's normaliser, then the weighted sum of values
        + hidden  # attention output projection
        + layer_norm
        + hidden  # feed-forward up
        + inner  # feed-forward down
        + layer_norm
    )
    return layer_norm + config["num_hidden_layers"] * per_layer + hidden + hidden  # embeddings, layers, pooler, head


def probability_bound(model: str | Path | dict, width: int) -> float:
    """The most a float32 probability of a model (its folder with config.json, or that config) may move with the
    shapes of the computation alone, at sequences up to `width` tokens."""
    config = model if isinstance(model, dict) else json.loads(Path(model, "config.json").read_text())
    return FLOAT32_UNIT_ROUNDOFF * summed_terms_to_a_logit(config, width)
