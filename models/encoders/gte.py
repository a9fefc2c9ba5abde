"""GTE (Alibaba's gte-multilingual-base and the rerankers and classifiers built on it), as transformers 5's
GteForSequenceClassification computes it.

A post-norm BERT with rotary positions instead of learned ones (8,192 positions) and a gated feed-forward
(act(gate) x up, then down): word (+ token-type) embeddings and a LayerNorm; in each block, attention with biases
and rotary queries and keys, residual, LayerNorm, the gated MLP, residual, LayerNorm; the classifier reads BERT's
tanh pooler over the first token.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import ClassVar

import tensorflow as tf
import tf_keras

from models.encoders import packed_rows
from models.encoders.activations import activation
from models.encoders.attention import attention_bias, merge_heads, scaled_dot_attention, split_heads
from models.encoders.dropout import Dropout
from models.encoders.layers import (
    BoundedWidth,
    TorchParam,
    UnsupportedConfigError,
    dense,
    dense_params,
    embedding,
    embedding_params,
    norm_params,
    run_block,
)
from models.encoders.norms import layer_norm
from models.encoders.rotary import default_theta, rotary_tables, rotate

PREFIX = "gte"
OTHER_PREFIXES = ("new",)  # the hub's original checkpoints (remote code's NewForSequenceClassification)
FEED_FORWARD_MATRICES = 3  # gate, up, down
DEFAULT_THETA = 160_000.0  # GteConfig.default_theta


@dataclasses.dataclass(frozen=True)
class Sizes:
    """Borrowed by the families built as GTE is (NomicBERT, Jina v3), each with its config class's defaults."""

    DEFAULTS: ClassVar[dict] = {
        "max_position_embeddings": 8192, "type_vocab_size": 1, "rope_theta": DEFAULT_THETA, "layer_norm_eps": 1e-12,
        "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.0,
    }  # fmt: skip
    vocab: int
    hidden: int
    intermediate: int
    heads: int
    layers: int
    positions: int
    type_vocab: int
    theta: float
    epsilon: float
    activation: str
    hidden_dropout: float
    attention_dropout: float
    classifier_dropout: float
    init_std: float

    @property
    def block_dropout(self) -> float:
        """The largest dropout inside a block (what would make recomputing it inexact: layers.run_block)."""
        return max(self.hidden_dropout, self.attention_dropout)

    @property
    def activations(self) -> tuple[str, ...]:
        return (self.activation,)

    @classmethod
    def of(cls, config: dict) -> Sizes:
        def get(key: str):
            return config.get(key, cls.DEFAULTS[key])

        dropout, classifier_dropout = get("hidden_dropout_prob"), config.get("classifier_dropout")
        hidden, heads = config["hidden_size"], config["num_attention_heads"]
        head_dim = config.get("head_dim") or hidden // heads
        if head_dim * heads != hidden:
            raise UnsupportedConfigError(f"head_dim {head_dim} x {heads} heads, not hidden size {hidden}")
        return cls(
            vocab=config["vocab_size"], hidden=config["hidden_size"], intermediate=config["intermediate_size"],
            heads=config["num_attention_heads"], layers=config["num_hidden_layers"],
            positions=get("max_position_embeddings"), type_vocab=get("type_vocab_size") or 0,
            theta=default_theta(config, cls.DEFAULTS["rope_theta"]), epsilon=get("layer_norm_eps"),
            activation=get("hidden_act"), hidden_dropout=dropout,
            attention_dropout=get("attention_probs_dropout_prob"),
            classifier_dropout=dropout if classifier_dropout is None else classifier_dropout,
            init_std=config.get("initializer_range", 0.02),
        )  # fmt: skip


def position_limit(config: dict) -> int:
    return Sizes.of(config).positions


def describe(sizes: Sizes) -> str:
    return f", rotary positions (theta {sizes.theta:,.0f}), gated feed-forward, post-norm, tanh pooler"


class Block(BoundedWidth, tf_keras.layers.Layer):
    """In the checkpoint's own layout (what the hub ships and transformers 5 writes back): q, k and v in one matrix,
    up and gate in another."""

    def __init__(self, sizes: Sizes, **kwargs):
        super().__init__(**kwargs)
        self.sizes = sizes
        h, std = sizes.hidden, sizes.init_std
        self.qkv = dense(3 * h, "qkv_proj", std=std)
        self.attention_out = dense(h, "o_proj", std=std)
        self.attention_norm = layer_norm(sizes.epsilon, "attn_ln")
        self.up_gate = dense(2 * sizes.intermediate, "up_gate_proj", use_bias=False, std=std)
        self.down = dense(h, "down_proj", std=std)
        self.mlp_norm = layer_norm(sizes.epsilon, "mlp_ln")
        self.attention_dropout = Dropout(sizes.attention_dropout)
        self.dropouts = [Dropout(sizes.hidden_dropout) for _ in range(3)]
        self.act = activation(sizes.activation)

    def call(self, x, bias, rotary, training=False):
        heads = self.sizes.heads
        q, k, v = (split_heads(t, heads) for t in tf.split(self.qkv(x), 3, axis=-1))
        q, k = rotate(q, *rotary), rotate(k, *rotary)
        attended = merge_heads(
            scaled_dot_attention(q, k, v, bias, self.attention_dropout, training, bounds=self)
        )
        x = self.attention_norm(x + self.dropouts[0](self.attention_out(attended), training=training))
        up, gate = tf.split(self.up_gate(x), 2, axis=-1)
        inner = self.dropouts[1](self.act(gate) * up, training=training)
        return self.mlp_norm(x + self.dropouts[2](self.down(inner), training=training))

    def torch_params(self, prefix: str) -> Iterator[TorchParam]:
        yield from dense_params(f"{prefix}.attention.qkv_proj", self.qkv)
        yield from dense_params(f"{prefix}.attention.o_proj", self.attention_out)
        yield from norm_params(f"{prefix}.attn_ln", self.attention_norm)
        yield from dense_params(f"{prefix}.mlp.up_gate_proj", self.up_gate)
        yield from dense_params(f"{prefix}.mlp.down_proj", self.down)
        yield from norm_params(f"{prefix}.mlp_ln", self.mlp_norm)


class Encoder(tf_keras.layers.Layer):
    """Borrowed by NomicBERT and Jina v3 with their own sizes, blocks and checkpoint names."""

    SIZES: ClassVar[type[Sizes]] = Sizes
    PREFIX: ClassVar[str] = PREFIX
    LAYERS: ClassVar[str] = "encoder.layer"  # where the checkpoint keeps its blocks, under PREFIX
    EMBEDDING_NORM: ClassVar[str] = "embeddings.LayerNorm"

    def make_block(self, sizes: Sizes, name: str) -> tf_keras.layers.Layer:
        return Block(sizes, name=name)

    def __init__(self, config: dict, **kwargs):
        super().__init__(**kwargs)
        self.sizes = sizes = self.SIZES.of(config)
        self.words = embedding(sizes.vocab, sizes.hidden, "word_embeddings", std=sizes.init_std)
        self.types = embedding(sizes.type_vocab, sizes.hidden, "token_type_embeddings") if sizes.type_vocab else None
        self.embedding_norm = layer_norm(sizes.epsilon, "embeddings_layernorm")
        self.embedding_dropout = Dropout(sizes.hidden_dropout)
        self.blocks = [self.make_block(sizes, f"layer_{i}") for i in range(sizes.layers)]
        self.recompute_blocks = False  # set by the Trainer where a step would not fit (layers.run_block)

    def call(self, inputs: dict, training=False):
        input_ids = inputs["input_ids"]
        x = self.words(input_ids)
        if self.types is not None:
            x = x + self.types(inputs.get("token_type_ids", tf.zeros_like(input_ids)))
        x = self.embedding_dropout(self.embedding_norm(x), training=training)
        bias = attention_bias(packed_rows.allowed_keys(inputs))
        at = packed_rows.positions(inputs, tf.shape(input_ids)[1])
        rotary = rotary_tables(at, self.sizes.hidden // self.sizes.heads, self.sizes.theta)
        for block in self.blocks:
            x = run_block(block, x, bias, rotary, training=training, recompute=self.recompute_blocks)
        return x

    def input_embeddings(self) -> tf_keras.layers.Layer:
        return self.words

    def torch_params(self) -> Iterator[TorchParam]:
        prefix = self.PREFIX
        yield from embedding_params(f"{prefix}.embeddings.word_embeddings", self.words)
        if self.types is not None:
            yield from embedding_params(f"{prefix}.embeddings.token_type_embeddings", self.types)
        yield from norm_params(f"{prefix}.{self.EMBEDDING_NORM}", self.embedding_norm)
        for i, block in enumerate(self.blocks):
            yield from block.torch_params(f"{prefix}.{self.LAYERS}.{i}")


class Head(tf_keras.layers.Layer):
    """BERT's pooler (dense + tanh on the first token), dropout, the classifier (NomicBERT's too)."""

    SIZES: ClassVar[type[Sizes]] = Sizes
    PREFIX: ClassVar[str] = PREFIX

    def __init__(self, config: dict, num_labels: int, **kwargs):
        super().__init__(**kwargs)
        sizes = self.SIZES.of(config)
        self.pooler = dense(sizes.hidden, "pooler", std=sizes.init_std)
        self.dropout = Dropout(sizes.classifier_dropout)
        self.classifier = dense(num_labels, "classifier", std=sizes.init_std)

    def call(self, hidden, attention_mask=None, training=False):
        pooled = tf.math.tanh(self.pooler(hidden[:, 0]))
        return self.classifier(self.dropout(pooled, training=training))

    def torch_params(self) -> Iterator[TorchParam]:
        yield from dense_params(f"{self.PREFIX}.pooler.dense", self.pooler)
        yield from dense_params("classifier", self.classifier)


def warmup_ratio(model_type: str) -> float | None:
    return None  # the recipe's default warm-up
