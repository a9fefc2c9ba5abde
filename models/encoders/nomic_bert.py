"""NomicBERT (nomic-ai/nomic-embed-text-v1.5 and the classifiers built on it), as transformers 5's native
NomicBertForSequenceClassification computes it (no remote code).

Jina v3's blocks (jina_v3.py) without biases and with a gated feed-forward (act(gate) x up, then down), GTE's
embeddings and BERT's tanh pooler over the first token (gte.py); rotary positions with theta 1,000 by default.
"""

from __future__ import annotations

from typing import ClassVar

import tf_keras

from models.encoders import gte, jina_v3

PREFIX = "nomic_bert"
OTHER_PREFIXES: tuple[str, ...] = ()
FEED_FORWARD_MATRICES = 3  # gate, up, down


class Sizes(gte.Sizes):
    DEFAULTS: ClassVar[dict] = {
        "max_position_embeddings": 2048, "type_vocab_size": 2, "rope_theta": 1_000.0, "layer_norm_eps": 1e-12,
        "hidden_act": "silu", "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
    }  # fmt: skip


def position_limit(config: dict) -> int:
    return Sizes.of(config).positions


def describe(sizes: Sizes) -> str:
    return f", rotary positions (theta {sizes.theta:,.0f}), gated feed-forward, post-norm, no biases, tanh pooler"


def warmup_ratio(model_type: str) -> float | None:
    return None  # the recipe's default warm-up


class Encoder(gte.Encoder):
    SIZES, PREFIX, LAYERS, EMBEDDING_NORM = Sizes, PREFIX, "encoder.layers", "emb_ln"

    def make_block(self, sizes: Sizes, name: str) -> tf_keras.layers.Layer:
        return jina_v3.Block(sizes, bias=False, gated=True, attention="attn", name=name)


class Head(gte.Head):
    SIZES, PREFIX = Sizes, PREFIX
