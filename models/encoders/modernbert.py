"""ModernBERT (Warner et al. 2024, answerdotai/ModernBERT) and the encoders that reuse its architecture (Ettin,
mmBERT, gte-modernbert, granite-embedding-r2), as transformers 5's ModernBertForSequenceClassification computes it.

Pre-norm blocks without biases (the first block's attention reads the embeddings unnormalised); rotary positions
with a global theta in full-attention layers and a local theta in sliding-window layers, where a token sees the
keys at most local_attention / 2 positions away; GeGLU feed-forward; a final norm; the classifier pools the first
token or the masked mean, then dense, activation, norm, dropout, linear. The window gives transformers' eager and SDPA
numbers; past long_attention.QUERY_CHUNK tokens attention runs in pieces of queries, each over the keys in its
window, so memory grows linearly with the width.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator

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
    masked_mean,
    norm_params,
    run_block,
)
from models.encoders.norms import layer_norm
from models.encoders.rotary import default_theta, rotary_tables, rotate

FULL, SLIDING = "full_attention", "sliding_attention"
DEFAULT_THETA = {FULL: 160_000.0, SLIDING: 10_000.0}  # ModernBertConfig.default_theta
PREFIX = "model"
FEED_FORWARD_MATRICES = 3  # GeGLU: Wi holds the input and the gate, then Wo
OTHER_PREFIXES: tuple[str, ...] = ()  # its checkpoints use one prefix


@dataclasses.dataclass(frozen=True)
class Sizes:
    vocab: int
    hidden: int
    intermediate: int
    heads: int
    layer_types: tuple[str, ...]
    thetas: dict[str, float]
    half_window: int
    positions: int
    epsilon: float
    norm_bias: bool
    attention_bias: bool
    mlp_bias: bool
    activation: str
    classifier_activation: str
    classifier_bias: bool
    pooling: str
    embedding_dropout: float
    attention_dropout: float
    mlp_dropout: float
    classifier_dropout: float
    init_std: float

    @property
    def layers(self) -> int:
        return len(self.layer_types)

    @property
    def block_dropout(self) -> float:
        """The largest dropout inside a block (what would make recomputing it inexact: layers.run_block)."""
        return max(self.attention_dropout, self.mlp_dropout)

    @property
    def activations(self) -> tuple[str, ...]:
        return (self.activation, self.classifier_activation)

    @classmethod
    def of(cls, config: dict) -> Sizes:
        """config.json as transformers 5's ModernBertConfig reads it, old (global_attn_every_n_layers, *_rope_theta)
        and new (layer_types, rope_parameters) keys alike."""
        layers = config["num_hidden_layers"]
        every = config.get("global_attn_every_n_layers", 3)
        layer_types = tuple(config.get("layer_types") or (SLIDING if i % every else FULL for i in range(layers)))
        rope = config.get("rope_parameters") or {}
        scaling = config.get("rope_scaling")
        thetas = {}
        for kind, old_key in ((FULL, "global_rope_theta"), (SLIDING, "local_rope_theta")):
            # each kind's parameters read as one rope config is (rotary.default_theta: scaling refused there)
            view = {"rope_parameters": rope.get(kind), "rope_scaling": scaling}
            thetas[kind] = default_theta({**view, "rope_theta": config[old_key]} if old_key in config else view,
                                         DEFAULT_THETA[kind])  # fmt: skip
        pooling = config.get("classifier_pooling", "cls")
        if pooling not in ("cls", "mean"):
            raise UnsupportedConfigError(f"classifier_pooling '{pooling}' (ModernBERT pools 'cls' or 'mean')")
        if config.get("hidden_size") % config.get("num_attention_heads"):
            raise UnsupportedConfigError("hidden_size that is not a multiple of num_attention_heads")
        return cls(
            vocab=config["vocab_size"], hidden=config["hidden_size"], intermediate=config["intermediate_size"],
            heads=config["num_attention_heads"], layer_types=layer_types, thetas=thetas,
            half_window=config.get("local_attention", 128) // 2, positions=config.get("max_position_embeddings", 8192),
            epsilon=config.get("norm_eps", 1e-5), norm_bias=config.get("norm_bias", False),
            attention_bias=config.get("attention_bias", False), mlp_bias=config.get("mlp_bias", False),
            activation=config.get("hidden_activation", "gelu"),
            classifier_activation=config.get("classifier_activation", "gelu"),
            classifier_bias=config.get("classifier_bias", False), pooling=pooling,
            embedding_dropout=config.get("embedding_dropout", 0.0),
            attention_dropout=config.get("attention_dropout", 0.0), mlp_dropout=config.get("mlp_dropout", 0.0),
            classifier_dropout=config.get("classifier_dropout", 0.0), init_std=config.get("initializer_range", 0.02),
        )  # fmt: skip


def position_limit(config: dict) -> int:
    return Sizes.of(config).positions


def describe(sizes: Sizes) -> str:
    local = sum(kind == SLIDING for kind in sizes.layer_types)
    return (
        f", local attention over {2 * sizes.half_window} tokens in {local} of {sizes.layers} layers (global in "
        f"the rest), rotary thetas {sizes.thetas[FULL]:,.0f} / {sizes.thetas[SLIDING]:,.0f}, {sizes.pooling} pooling"
    )


class Block(BoundedWidth, tf_keras.layers.Layer):
    def __init__(self, sizes: Sizes, index: int, **kwargs):
        super().__init__(**kwargs)
        self.sizes, self.index, self.kind = sizes, index, sizes.layer_types[index]
        h, std = sizes.hidden, sizes.init_std
        out_std = std / math.sqrt(2.0 * sizes.layers)
        self.attn_norm = layer_norm(sizes.epsilon, "attn_norm", center=sizes.norm_bias) if index else None
        self.wqkv = dense(3 * h, "Wqkv", use_bias=sizes.attention_bias, std=std)
        self.wo = dense(h, "attn_Wo", use_bias=sizes.attention_bias, std=out_std)
        self.mlp_norm = layer_norm(sizes.epsilon, "mlp_norm", center=sizes.norm_bias)
        self.wi = dense(2 * sizes.intermediate, "Wi", use_bias=sizes.mlp_bias, std=std)
        self.mlp_wo = dense(h, "mlp_Wo", use_bias=sizes.mlp_bias, std=out_std)
        self.attention_dropout = Dropout(sizes.attention_dropout)
        self.out_dropout = Dropout(sizes.attention_dropout)
        self.mlp_dropout = Dropout(sizes.mlp_dropout)
        self.act = activation(sizes.activation)

    def call(self, x, bias, rotary, training=False):
        heads = self.sizes.heads
        normed = self.attn_norm(x) if self.attn_norm is not None else x
        q, k, v = tf.split(self.wqkv(normed), 3, axis=-1)
        q, k, v = (split_heads(t, heads) for t in (q, k, v))
        q, k = rotate(q, *rotary), rotate(k, *rotary)
        half_window = self.sizes.half_window if self.kind == SLIDING else None
        attended = merge_heads(
            scaled_dot_attention(q, k, v, bias, self.attention_dropout, training, half_window, self)
        )
        x = x + self.out_dropout(self.wo(attended), training=training)
        inner, gate = tf.split(self.wi(self.mlp_norm(x)), 2, axis=-1)
        return x + self.mlp_wo(self.mlp_dropout(self.act(inner) * gate, training=training))

    def torch_params(self, prefix: str) -> Iterator[TorchParam]:
        if self.attn_norm is not None:
            yield from norm_params(f"{prefix}.attn_norm", self.attn_norm)
        yield from dense_params(f"{prefix}.attn.Wqkv", self.wqkv)
        yield from dense_params(f"{prefix}.attn.Wo", self.wo)
        yield from norm_params(f"{prefix}.mlp_norm", self.mlp_norm)
        yield from dense_params(f"{prefix}.mlp.Wi", self.wi)
        yield from dense_params(f"{prefix}.mlp.Wo", self.mlp_wo)


class Encoder(tf_keras.layers.Layer):
    def __init__(self, config: dict, **kwargs):
        super().__init__(**kwargs)
        self.sizes = sizes = Sizes.of(config)
        self.words = embedding(sizes.vocab, sizes.hidden, "tok_embeddings", std=sizes.init_std)
        self.embedding_norm = layer_norm(sizes.epsilon, "embeddings_norm", center=sizes.norm_bias)
        self.embedding_dropout = Dropout(sizes.embedding_dropout)
        self.blocks = [Block(sizes, i, name=f"layer_{i}") for i in range(sizes.layers)]
        self.recompute_blocks = False  # set by the Trainer where a step would not fit (layers.run_block)
        self.final_norm = layer_norm(sizes.epsilon, "final_norm", center=sizes.norm_bias)

    def call(self, inputs: dict, training=False):
        sizes = self.sizes
        input_ids = inputs["input_ids"]
        x = self.embedding_dropout(self.embedding_norm(self.words(input_ids)), training=training)
        # local layers add their band where they attend (attention.scaled_dot_attention): in a packed row's text too
        bias = attention_bias(packed_rows.allowed_keys(inputs))
        head_dim, at = sizes.hidden // sizes.heads, packed_rows.positions(inputs, tf.shape(input_ids)[1])
        rotary = {kind: rotary_tables(at, head_dim, sizes.thetas[kind]) for kind in set(sizes.layer_types)}
        for block in self.blocks:
            x = run_block(block, x, bias, rotary[block.kind], training=training, recompute=self.recompute_blocks)
        return self.final_norm(x)

    def input_embeddings(self) -> tf_keras.layers.Layer:
        return self.words

    def torch_params(self) -> Iterator[TorchParam]:
        yield from embedding_params(f"{PREFIX}.embeddings.tok_embeddings", self.words)
        yield from norm_params(f"{PREFIX}.embeddings.norm", self.embedding_norm)
        for i, block in enumerate(self.blocks):
            yield from block.torch_params(f"{PREFIX}.layers.{i}")
        yield from norm_params(f"{PREFIX}.final_norm", self.final_norm)


class Head(tf_keras.layers.Layer):
    """Pooling (first token or masked mean), dense, activation, norm, dropout, classifier."""

    def __init__(self, config: dict, num_labels: int, **kwargs):
        super().__init__(**kwargs)
        self.sizes = sizes = Sizes.of(config)
        out_std = sizes.init_std / math.sqrt(2.0 * sizes.layers)
        self.dense = dense(sizes.hidden, "head_dense", use_bias=sizes.classifier_bias, std=out_std)
        self.norm = layer_norm(sizes.epsilon, "head_norm", center=sizes.norm_bias)
        self.dropout = Dropout(sizes.classifier_dropout)
        self.classifier = dense(num_labels, "classifier", std=sizes.hidden**-0.5)
        self.act = activation(sizes.classifier_activation)

    def call(self, hidden, attention_mask=None, training=False):
        pooled = hidden[:, 0] if self.sizes.pooling == "cls" else masked_mean(hidden, attention_mask)
        return self.classifier(self.dropout(self.norm(self.act(self.dense(pooled))), training=training))

    def torch_params(self) -> Iterator[TorchParam]:
        yield from dense_params("head.dense", self.dense)
        yield from norm_params("head.norm", self.norm)
        yield from dense_params("classifier", self.classifier)


def warmup_ratio(model_type: str) -> float | None:
    return None  # the recipe's default warm-up
