"""Jina embeddings v3 (jinaai/jina-embeddings-v3-hf), as transformers 5's JinaEmbeddingsV3ForSequenceClassification
computes it: XLM-R with rotary positions instead of learned ones.

Built as GTE is (gte.py: word + token-type embeddings and a LayerNorm, post-norm blocks with rotary queries and
keys), with q, k, v and o projections apart and biased, a plain feed-forward (fc1, activation, fc2) and XLM-R's
classification head (dense and tanh over the first token, between dropouts, then out_proj). The remote-code release
carries task LoRA adapters; the native class transformers 5 ships has none, and a config that names adapters is
refused with the choice to make.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import tensorflow as tf
import tf_keras

from models.encoders import gte
from models.encoders.activations import activation
from models.encoders.attention import merge_heads, scaled_dot_attention, split_heads
from models.encoders.dropout import Dropout
from models.encoders.layers import BoundedWidth, TorchParam, UnsupportedConfigError, dense, dense_params, norm_params
from models.encoders.norms import layer_norm
from models.encoders.rotary import rotate

PREFIX = "roberta"
OTHER_PREFIXES: tuple[str, ...] = ()
FEED_FORWARD_MATRICES = 2  # fc1, fc2
ADAPTER_KEYS = ("lora_adaptations", "lora_rank", "task_instructions")  # the remote-code release's config


class Sizes(gte.Sizes):
    DEFAULTS: ClassVar[dict] = {
        "max_position_embeddings": 8194, "type_vocab_size": 1, "rope_theta": 20_000.0, "layer_norm_eps": 1e-5,
        "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
    }  # fmt: skip

    @classmethod
    def of(cls, config: dict) -> Sizes:
        named = [key for key in ADAPTER_KEYS if key in config]
        if named:
            raise UnsupportedConfigError(
                f"task LoRA adapters ({', '.join(named)}: the remote-code jina-embeddings-v3); fine-tune the native "
                "jinaai/jina-embeddings-v3-hf checkpoint, or merge the task's adapter into the weights first"
            )
        return super().of(config)


def position_limit(config: dict) -> int:
    return Sizes.of(config).positions


def describe(sizes: Sizes) -> str:
    return f", rotary positions (theta {sizes.theta:,.0f}), post-norm, XLM-R's classification head"


def warmup_ratio(model_type: str) -> float | None:
    return None  # the recipe's default warm-up


class Block(BoundedWidth, tf_keras.layers.Layer):
    """Attention with rotary queries and keys, residual, LayerNorm; the feed-forward, residual, LayerNorm. In the
    checkpoint's own layout (what the hub ships and transformers 5 writes back): q, k and v in one matrix. Biased
    projections and a plain feed-forward (fc1, fc2) here; NomicBERT borrows it without biases and with a gated one
    (`gated`: fc11 the up projection, fc12 the gate, fc2 down) and its attention named `attn` (`attention`)."""

    def __init__(self, sizes: Sizes, *, bias: bool = True, gated: bool = False, attention: str = "mixer", **kwargs):
        super().__init__(**kwargs)
        self.sizes, self.gated, self.attention_name = sizes, gated, attention
        h, i, std = sizes.hidden, sizes.intermediate, sizes.init_std
        self.qkv = dense(3 * h, "Wqkv", use_bias=bias, std=std)
        self.attention_out = dense(h, "out_proj", use_bias=bias, std=std)
        self.attention_norm = layer_norm(sizes.epsilon, "norm1")
        names = ("fc11", "fc12", "fc2") if gated else ("fc1", "fc2")
        self.feed_forward = [dense(h if name == "fc2" else i, name, use_bias=bias, std=std) for name in names]
        self.mlp_norm = layer_norm(sizes.epsilon, "norm2")
        self.attention_dropout = Dropout(sizes.attention_dropout)
        self.dropouts = [Dropout(sizes.hidden_dropout) for _ in range(2)]
        self.act = activation(sizes.activation)

    def call(self, x, bias, rotary, training=False):
        q, k, v = (split_heads(t, self.sizes.heads) for t in tf.split(self.qkv(x), 3, axis=-1))
        q, k = rotate(q, *rotary), rotate(k, *rotary)
        attended = merge_heads(scaled_dot_attention(q, k, v, bias, self.attention_dropout, training, bounds=self))
        x = self.attention_norm(x + self.dropouts[0](self.attention_out(attended), training=training))
        if self.gated:
            up, gate, down = self.feed_forward
            inner = self.act(gate(x)) * up(x)
        else:
            up, down = self.feed_forward
            inner = self.act(up(x))
        return self.mlp_norm(x + self.dropouts[1](down(inner), training=training))

    def torch_params(self, prefix: str) -> Iterator[TorchParam]:
        yield from dense_params(f"{prefix}.{self.attention_name}.Wqkv", self.qkv)
        yield from dense_params(f"{prefix}.{self.attention_name}.out_proj", self.attention_out)
        yield from norm_params(f"{prefix}.norm1", self.attention_norm)
        for layer in self.feed_forward:
            yield from dense_params(f"{prefix}.mlp.{layer.name}", layer)
        yield from norm_params(f"{prefix}.norm2", self.mlp_norm)


class Encoder(gte.Encoder):
    SIZES, PREFIX, LAYERS, EMBEDDING_NORM = Sizes, PREFIX, "encoder.layers", "emb_ln"

    def make_block(self, sizes: Sizes, name: str) -> tf_keras.layers.Layer:
        return Block(sizes, name=name)


class Head(tf_keras.layers.Layer):
    """XLM-R's classification head: the first token, dropout, dense, tanh, dropout, out_proj."""

    def __init__(self, config: dict, num_labels: int, **kwargs):
        super().__init__(**kwargs)
        sizes = Sizes.of(config)
        self.inner = dense(sizes.hidden, "dense", std=sizes.init_std)
        self.dropouts = [Dropout(sizes.classifier_dropout) for _ in range(2)]
        self.out = dense(num_labels, "out_proj", std=sizes.init_std)

    def call(self, hidden, attention_mask=None, training=False):
        first = self.dropouts[0](hidden[:, 0], training=training)
        return self.out(self.dropouts[1](tf.math.tanh(self.inner(first)), training=training))

    def torch_params(self) -> Iterator[TorchParam]:
        yield from dense_params("classifier.dense", self.inner)
        yield from dense_params("classifier.out_proj", self.out)
