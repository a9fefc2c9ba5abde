"""EuroBERT (Boizard et al. 2025), as transformers 5's EuroBertForSequenceClassification computes it; the Llama-style
encoder block (the embedders built from decoders use it too).

Pre-norm blocks with RMSNorm and no biases by default: grouped-query attention (each key/value head shared by
heads / kv_heads query heads) over rotary queries and keys, a SwiGLU feed-forward (silu(gate) x up, then down), a
final RMSNorm. The classifier pools the first token ("bos") or the masked mean ("mean"), then dense, GELU and the
classifier; or ("late", the default) runs dense, GELU and the classifier on every token and averages the logits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import ClassVar

import tensorflow as tf
import tf_keras

from models.encoders import packed_rows
from models.encoders.activations import activation, gelu
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
    run_block,
)
from models.encoders.rotary import default_theta, rotary_tables, rotate

PREFIX = "model"
FEED_FORWARD_MATRICES = 3  # gate, up, down
OTHER_PREFIXES: tuple[str, ...] = ()  # its checkpoints use one prefix
DEFAULT_THETA = 10_000.0  # transformers' default rope_theta
POOLINGS = ("bos", "mean", "late")


@dataclasses.dataclass(frozen=True)
class Sizes:
    vocab: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    layers: int
    positions: int
    theta: float
    epsilon: float
    activation: str
    attention_bias: bool
    mlp_bias: bool
    attention_dropout: float
    pooling: str
    init_std: float

    @property
    def block_dropout(self) -> float:
        """The only dropout inside a block, attention's (what would make recomputing it inexact: layers.run_block)."""
        return self.attention_dropout

    @property
    def activations(self) -> tuple[str, ...]:
        return (self.activation,)

    @classmethod
    def of(cls, config: dict) -> Sizes:
        heads = config["num_attention_heads"]
        kv_heads = config.get("num_key_value_heads") or heads
        pooling = config.get("classifier_pooling", "late")
        if pooling not in POOLINGS:
            raise UnsupportedConfigError(f"classifier_pooling '{pooling}' (EuroBERT pools {', '.join(POOLINGS)})")
        if heads % kv_heads:
            raise UnsupportedConfigError(f"{heads} attention heads, which {kv_heads} key/value heads do not divide")
        return cls(
            vocab=config["vocab_size"], hidden=config["hidden_size"], intermediate=config["intermediate_size"],
            heads=heads, kv_heads=kv_heads, head_dim=config.get("head_dim") or config["hidden_size"] // heads,
            layers=config["num_hidden_layers"], positions=config.get("max_position_embeddings", 8192),
            theta=default_theta(config, DEFAULT_THETA), epsilon=config.get("rms_norm_eps", 1e-5),
            activation=config.get("hidden_act", "silu"), attention_bias=config.get("attention_bias", False),
            mlp_bias=config.get("mlp_bias", False), attention_dropout=config.get("attention_dropout", 0.0),
            pooling=pooling, init_std=config.get("initializer_range", 0.02),
        )  # fmt: skip


def position_limit(config: dict) -> int:
    return Sizes.of(config).positions


def describe(sizes: Sizes) -> str:
    heads = f"{sizes.heads} query heads over {sizes.kv_heads} key/value heads" if sizes.kv_heads < sizes.heads else ""
    return (
        f", rotary positions (theta {sizes.theta:,.0f}), RMSNorm, SwiGLU, {heads or 'multi-head'} attention, "
        f"{sizes.pooling} pooling"
    )


class RMSNorm(tf_keras.layers.Layer):
    """x / sqrt(mean(x^2) + eps) x weight, in float32 (hand-written: tf_keras has no RMS normalization layer)."""

    def __init__(self, epsilon: float, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = epsilon

    def build(self, input_shape):
        self.weight = self.add_weight("weight", shape=[input_shape[-1]], initializer="ones")

    def call(self, x):
        x32 = tf.cast(x, tf.float32)
        normed = x32 * tf.math.rsqrt(tf.reduce_mean(tf.square(x32), axis=-1, keepdims=True) + self.epsilon)
        return tf.cast(normed, x.dtype) * tf.cast(self.weight, x.dtype)


class Block(BoundedWidth, tf_keras.layers.Layer):
    """`half_window`: local attention (UltraBERT's sliding layers borrow the block), keys at most that far away."""

    def __init__(self, sizes: Sizes, half_window: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self.sizes, self.half_window = sizes, half_window
        std, kv_width = sizes.init_std, sizes.kv_heads * sizes.head_dim
        self.input_norm = RMSNorm(sizes.epsilon, name="input_layernorm")
        self.query = dense(sizes.heads * sizes.head_dim, "q_proj", use_bias=sizes.attention_bias, std=std)
        self.key = dense(kv_width, "k_proj", use_bias=sizes.attention_bias, std=std)
        self.value = dense(kv_width, "v_proj", use_bias=sizes.attention_bias, std=std)
        self.attention_out = dense(sizes.hidden, "o_proj", use_bias=sizes.attention_bias, std=std)
        self.attention_norm = RMSNorm(sizes.epsilon, name="post_attention_layernorm")
        self.gate = dense(sizes.intermediate, "gate_proj", use_bias=sizes.mlp_bias, std=std)
        self.up = dense(sizes.intermediate, "up_proj", use_bias=sizes.mlp_bias, std=std)
        self.down = dense(sizes.hidden, "down_proj", use_bias=sizes.mlp_bias, std=std)
        self.attention_dropout = Dropout(sizes.attention_dropout)
        self.act = activation(sizes.activation)

    def call(self, x, bias, rotary, training=False):
        sizes = self.sizes
        normed = self.input_norm(x)
        q = rotate(split_heads(self.query(normed), sizes.heads), *rotary)
        k = rotate(split_heads(self.key(normed), sizes.kv_heads), *rotary)
        v = split_heads(self.value(normed), sizes.kv_heads)
        shared = sizes.heads // sizes.kv_heads  # transformers' repeat_kv: each key/value head for `shared` heads
        if shared > 1:  # as repeat_kv, none at one: tf.repeat copies k and v, and a recomputed block keeps the copies
            k, v = tf.repeat(k, shared, axis=1), tf.repeat(v, shared, axis=1)
        x = x + self.attention_out(
            merge_heads(
                scaled_dot_attention(q, k, v, bias, self.attention_dropout, training, self.half_window, bounds=self)
            )
        )
        normed = self.attention_norm(x)
        return x + self.down(self.act(self.gate(normed)) * self.up(normed))

    def torch_params(self, prefix: str) -> Iterator[TorchParam]:
        yield TorchParam(f"{prefix}.input_layernorm.weight", self.input_norm.weight)
        for name, layer in (("q_proj", self.query), ("k_proj", self.key), ("v_proj", self.value)):
            yield from dense_params(f"{prefix}.self_attn.{name}", layer)
        yield from dense_params(f"{prefix}.self_attn.o_proj", self.attention_out)
        yield TorchParam(f"{prefix}.post_attention_layernorm.weight", self.attention_norm.weight)
        for name, layer in (("gate_proj", self.gate), ("up_proj", self.up), ("down_proj", self.down)):
            yield from dense_params(f"{prefix}.mlp.{name}", layer)


class Encoder(tf_keras.layers.Layer):
    """Borrowed by UltraBERT with its own sizes, a window per block and a RoPE base per layer type."""

    SIZES: ClassVar[type[Sizes]] = Sizes
    PREFIX: ClassVar[str] = PREFIX

    def make_block(self, sizes: Sizes, index: int) -> Block:
        return Block(sizes, name=f"layer_{index}")

    def rotary_of_layers(self, at: tf.Tensor) -> list[tuple[tf.Tensor, tf.Tensor]]:
        """Each block's rotary tables at positions `at`: one theta for all here."""
        return [rotary_tables(at, self.sizes.head_dim, self.sizes.theta)] * self.sizes.layers

    def __init__(self, config: dict, **kwargs):
        super().__init__(**kwargs)
        self.sizes = sizes = self.SIZES.of(config)
        self.words = embedding(sizes.vocab, sizes.hidden, "embed_tokens", std=sizes.init_std)
        self.blocks = [self.make_block(sizes, i) for i in range(sizes.layers)]
        self.recompute_blocks = False  # set by the Trainer where a step would not fit (layers.run_block)
        self.final_norm = RMSNorm(sizes.epsilon, name="norm")

    def call(self, inputs: dict, training=False):
        input_ids = inputs["input_ids"]
        x = self.words(input_ids)
        bias = attention_bias(packed_rows.allowed_keys(inputs))
        at = packed_rows.positions(inputs, tf.shape(input_ids)[1])
        for block, rotary in zip(self.blocks, self.rotary_of_layers(at), strict=True):
            x = run_block(block, x, bias, rotary, training=training, recompute=self.recompute_blocks)
        return self.final_norm(x)

    def input_embeddings(self) -> tf_keras.layers.Layer:
        return self.words

    def torch_params(self) -> Iterator[TorchParam]:
        yield from embedding_params(f"{self.PREFIX}.embed_tokens", self.words)
        for i, block in enumerate(self.blocks):
            yield from block.torch_params(f"{self.PREFIX}.layers.{i}")
        yield TorchParam(f"{self.PREFIX}.norm.weight", self.final_norm.weight)


class Head(tf_keras.layers.Layer):
    """dense, GELU, classifier: on the pooled first token or masked mean, or on every token with the logits averaged
    over the text's tokens ("late")."""

    def __init__(self, config: dict, num_labels: int, **kwargs):
        super().__init__(**kwargs)
        self.sizes = sizes = Sizes.of(config)
        self.dense = dense(sizes.hidden, "dense", std=sizes.init_std)
        self.classifier = dense(num_labels, "classifier", std=sizes.init_std)

    def call(self, hidden, attention_mask=None, training=False):
        mask = tf.cast(attention_mask, hidden.dtype)[:, :, tf.newaxis]
        if self.sizes.pooling == "late":
            logits = self.classifier(gelu(self.dense(hidden)))
            return tf.reduce_sum(logits * tf.cast(mask, logits.dtype), axis=1) / tf.cast(
                tf.reduce_sum(mask, axis=1), logits.dtype
            )
        pooled = hidden[:, 0] if self.sizes.pooling == "bos" else masked_mean(hidden, attention_mask)
        return self.classifier(gelu(self.dense(pooled)))

    def torch_params(self) -> Iterator[TorchParam]:
        yield from dense_params("dense", self.dense)
        yield from dense_params("classifier", self.classifier)


def warmup_ratio(model_type: str) -> float | None:
    return None  # the recipe's default warm-up
