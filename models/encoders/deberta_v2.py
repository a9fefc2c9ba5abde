"""DeBERTa-v2 and v3 (He et al. 2021), as transformers 5's DebertaV2ForSequenceClassification computes them.

Disentangled attention: each score adds to content-to-content q.k the content-to-position (c2p: the query against
the key's relative position embedding) and position-to-content (p2c: the key against the query's) terms, all scaled
by sqrt(head size x the number of terms). Relative positions are log-bucketed past half of `position_buckets` (v3:
256 buckets over 512 positions) and read from one shared table, LayerNorm'd (`norm_rel_ebd: layer_norm`); v3
shares the content projections with the positions (`share_att_key`). Embeddings carry no absolute positions in v3
(`position_biased_input: false`), are masked by the attention mask, and the head is a ContextPooler (dropout,
dense, GELU) on the first token, then dropout and the classifier. A query that is padding sees nothing (its row is
the dtype's minimum before softmax, as transformers fills it), which only padding's own outputs read.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator

import tensorflow as tf
import tf_keras

from models.encoders import bert_family, packed_rows
from models.encoders.activations import activation
from models.encoders.attention import attention_bias, scaled_dot_attention, split_heads
from models.encoders.dropout import Dropout
from models.encoders.layers import (
    TorchParam,
    UnsupportedConfigError,
    dense,
    dense_params,
    embedding,
    embedding_params,
    norm_params,
)
from models.encoders.norms import layer_norm

PREFIX = "deberta"
C2P, P2C = "c2p", "p2c"

FEED_FORWARD_MATRICES = 2  # up, down
OTHER_PREFIXES: tuple[str, ...] = ()  # its checkpoints use one prefix


@dataclasses.dataclass(frozen=True)
class Sizes:
    vocab: int
    hidden: int
    embedding: int
    intermediate: int
    layers: int
    heads: int
    positions: int
    token_types: int
    position_biased_input: bool
    relative_attention: bool
    position_buckets: int
    max_relative_positions: int
    pos_att_type: tuple[str, ...]
    share_att_key: bool
    norm_rel_ebd: bool
    activation: str
    pooler_activation: str
    hidden_dropout: float
    attention_dropout: float
    pooler_dropout: float
    classifier_dropout: float
    epsilon: float
    pad_id: int
    init_std: float

    @property
    def span(self) -> int:
        """Relative positions each side the table holds (att_span in transformers)."""
        return self.position_buckets if self.position_buckets > 0 else self.max_relative_positions

    @property
    def activations(self) -> tuple[str, ...]:
        return (self.activation, self.pooler_activation)

    @property
    def block_dropout(self) -> None:
        return None  # its blocks are never recomputed (layers.run_block)

    @classmethod
    def of(cls, config: dict) -> Sizes:
        if config.get("conv_kernel_size", 0):
            raise UnsupportedConfigError("conv_kernel_size (the convolution of DeBERTa-v2 xlarge and xxlarge)")
        if (
            config.get("z_steps", 0) > 1
            or config.get("pooler_hidden_size", config["hidden_size"]) != config["hidden_size"]
        ):
            raise UnsupportedConfigError("z_steps or a pooler_hidden_size other than hidden_size")
        if (
            config.get("attention_head_size", config["hidden_size"] // config["num_attention_heads"])
            * config["num_attention_heads"]
            != config["hidden_size"]
        ):
            raise UnsupportedConfigError("an attention_head_size that does not split hidden_size")
        kinds = config.get("pos_att_type") or []
        kinds = [k.strip() for k in kinds.lower().split("|")] if isinstance(kinds, str) else [k.lower() for k in kinds]
        if set(kinds) - {C2P, P2C}:
            raise UnsupportedConfigError(f"pos_att_type {kinds} (c2p and p2c are computed)")
        max_relative = config.get("max_relative_positions", -1)
        hidden_dropout = config.get("hidden_dropout_prob", 0.1)
        classifier_dropout = config.get("cls_dropout")
        return cls(
            vocab=config["vocab_size"], hidden=config["hidden_size"],
            embedding=config.get("embedding_size") or config["hidden_size"],
            intermediate=config["intermediate_size"], layers=config["num_hidden_layers"],
            heads=config["num_attention_heads"], positions=config.get("max_position_embeddings", 512),
            token_types=config.get("type_vocab_size", 0),
            position_biased_input=config.get("position_biased_input", True),
            relative_attention=config.get("relative_attention", False),
            position_buckets=config.get("position_buckets", -1),
            max_relative_positions=max_relative if max_relative >= 1 else config.get("max_position_embeddings", 512),
            pos_att_type=tuple(kinds), share_att_key=config.get("share_att_key", False),
            norm_rel_ebd="layer_norm" in [x.strip() for x in config.get("norm_rel_ebd", "none").lower().split("|")],
            activation=config.get("hidden_act", "gelu"), pooler_activation=config.get("pooler_hidden_act", "gelu"),
            hidden_dropout=hidden_dropout, attention_dropout=config.get("attention_probs_dropout_prob", 0.1),
            pooler_dropout=config.get("pooler_dropout", 0.0),
            classifier_dropout=hidden_dropout if classifier_dropout is None else classifier_dropout,
            epsilon=config.get("layer_norm_eps", 1e-7), pad_id=config.get("pad_token_id") or 0,
            init_std=config.get("initializer_range", 0.02),
        )  # fmt: skip


def position_limit(config: dict) -> int:
    """The length it was trained at: relative positions would run past it, but nothing was learned there."""
    return Sizes.of(config).positions


def describe(sizes: Sizes) -> str:
    if not sizes.relative_attention:
        return ""
    buckets = f", log-bucketed into {sizes.span} each side" if sizes.position_buckets > 0 else ""
    return f", disentangled attention ({'+'.join(sizes.pos_att_type)}) over relative positions{buckets}"


def relative_positions(width: tf.Tensor, buckets: int, max_position: int) -> tf.Tensor:
    """[T, T] query position - key position, log-bucketed beyond half the buckets (make_log_bucket_position),
    computed in float32 as transformers does."""
    positions = tf.range(width)
    relative = positions[:, tf.newaxis] - positions[tf.newaxis, :]
    if buckets <= 0 or max_position <= 0:
        return relative
    relative = tf.cast(relative, tf.float32)
    mid = buckets // 2
    sign = tf.sign(relative)
    absolute = tf.where((relative < mid) & (relative > -mid), float(mid - 1), tf.abs(relative))
    log_scale = tf.math.log(tf.constant((max_position - 1) / mid, tf.float32))
    logged = tf.math.ceil(tf.math.log(absolute / mid) / log_scale * (mid - 1)) + mid
    return tf.cast(tf.where(absolute <= mid, relative, logged * sign), tf.int32)


# PyTorch names of the parts bert_family.Block shares with DeBERTa's layer
_BLOCK_NAMES = {
    "query": "attention.self.query_proj",
    "key": "attention.self.key_proj",
    "value": "attention.self.value_proj",
    "attention_out": "attention.output.dense",
    "attention_norm": "attention.output.LayerNorm",
    "up": "intermediate.dense",
    "down": "output.dense",
    "output_norm": "output.LayerNorm",
}


class Block(bert_family.Block):
    """BERT's post-norm block with disentangled attention (and, unless shared, its own position projections)."""

    def __init__(self, sizes: Sizes, **kwargs):
        super().__init__(sizes, _BLOCK_NAMES, **kwargs)
        h, std = sizes.hidden, sizes.init_std
        relative = sizes.relative_attention and not sizes.share_att_key
        self.pos_key = dense(h, "pos_key_proj", std=std) if relative and C2P in sizes.pos_att_type else None
        self.pos_query = dense(h, "pos_query_proj", std=std) if relative and P2C in sizes.pos_att_type else None
        self.position_dropout = Dropout(sizes.hidden_dropout)

    def call(self, x, allowed, relative, rel_embeddings, training=False):
        """The shared attention core (attention.scaled_dot_attention: whole, in pieces or recomputed) with the
        disentangled c2p and p2c scores as its bias, and DeBERTa's scale sqrt(d x terms) as queries scaled by
        1 / sqrt(terms) before the core's own 1 / sqrt(d)."""
        sizes, heads = self.sizes, self.sizes.heads
        q, k, v = (split_heads(layer(x), heads) for layer in (self.query, self.key, self.value))
        terms = 1 + len(sizes.pos_att_type) if sizes.relative_attention else 1
        bias = attention_bias(allowed)
        if sizes.relative_attention:
            dropped = self.position_dropout(rel_embeddings, training=training)
            bias += self._disentangled(q, k, relative, dropped, math.sqrt(q.shape[-1] * terms))
        scaled = q / math.sqrt(terms) if terms > 1 else q
        attended = scaled_dot_attention(scaled, k, v, bias, self.attention_dropout, training, bounds=self)
        return self.after_attention(x, attended, training)

    def _disentangled(self, q, k, relative, rel_embeddings, scale):
        """c2p and p2c terms [B, H, T, T] in float32."""
        sizes, span = self.sizes, self.sizes.span
        table = rel_embeddings[tf.newaxis, : 2 * span]

        def positions(layer):  # [1, 2S, H] -> [1, heads, 2S, d]
            return split_heads(tf.cast(layer(table), self.compute_dtype), sizes.heads)

        batch, width = tf.shape(q)[0], tf.shape(q)[2]
        score = 0.0
        if C2P in sizes.pos_att_type:
            pos_key = positions(self.key if sizes.share_att_key else self.pos_key)
            c2p = tf.cast(tf.matmul(q, pos_key, transpose_b=True), tf.float32)  # [B, H, T, 2S]
            index = tf.clip_by_value(relative + span, 0, 2 * span - 1)
            index = tf.broadcast_to(index, [batch, sizes.heads, width, width])
            score += tf.gather(c2p, index, batch_dims=3) / scale
        if P2C in sizes.pos_att_type:
            pos_query = positions(self.query if sizes.share_att_key else self.pos_query)
            p2c = tf.cast(tf.matmul(k, pos_query, transpose_b=True), tf.float32)  # [B, H, T(keys), 2S]
            index = tf.clip_by_value(-relative + span, 0, 2 * span - 1)
            index = tf.broadcast_to(index, [batch, sizes.heads, width, width])
            score += tf.transpose(tf.gather(p2c, index, batch_dims=3), [0, 1, 3, 2]) / scale
        return score

    def torch_params(self, prefix: str) -> Iterator[TorchParam]:
        yield from super().torch_params(prefix)
        for name, layer in (("pos_key_proj", self.pos_key), ("pos_query_proj", self.pos_query)):
            if layer is not None:
                yield from dense_params(f"{prefix}.attention.self.{name}", layer)


class Encoder(tf_keras.layers.Layer):
    def __init__(self, config: dict, **kwargs):
        super().__init__(**kwargs)
        self.sizes = sizes = Sizes.of(config)

        def table(rows: int, width: int, name: str) -> tf_keras.layers.Embedding:
            return embedding(rows, width, name, std=sizes.init_std)

        self.words = table(sizes.vocab, sizes.embedding, "word_embeddings")
        self.positions = (
            table(sizes.positions, sizes.embedding, "position_embeddings") if sizes.position_biased_input else None
        )
        self.token_types = (
            table(sizes.token_types, sizes.embedding, "token_type_embeddings") if sizes.token_types else None
        )
        self.project = dense(sizes.hidden, "embed_proj", use_bias=False) if sizes.embedding != sizes.hidden else None
        self.embedding_norm = layer_norm(sizes.epsilon, "embeddings_LayerNorm")
        self.embedding_dropout = Dropout(sizes.hidden_dropout)
        self.relative = table(2 * sizes.span, sizes.hidden, "rel_embeddings") if sizes.relative_attention else None
        self.relative_norm = layer_norm(sizes.epsilon, "rel_LayerNorm") if sizes.norm_rel_ebd else None
        self.blocks = [Block(sizes, name=f"layer_{i}") for i in range(sizes.layers)]

    def call(self, inputs: dict, training=False):
        sizes = self.sizes
        input_ids, mask = inputs["input_ids"], inputs["attention_mask"]
        width = tf.shape(input_ids)[1]
        x = self.words(input_ids)
        if self.positions is not None:
            x += self.positions(packed_rows.positions(inputs, width))
        if self.token_types is not None:
            types = inputs.get("token_type_ids")
            x += self.token_types(tf.zeros_like(input_ids) if types is None else types)
        if self.project is not None:
            x = self.project(x)
        x = self.embedding_norm(x) * tf.cast(mask, x.dtype)[:, :, tf.newaxis]
        x = self.embedding_dropout(x, training=training)
        real = tf.cast(mask, tf.bool)
        allowed = real[:, tf.newaxis, :, tf.newaxis] & packed_rows.allowed_keys(inputs)  # query and key real
        relative, rel_embeddings = None, None
        if self.relative is not None:
            relative = relative_positions(width, sizes.position_buckets, sizes.max_relative_positions)
            rel_embeddings = self.relative(tf.range(2 * sizes.span))  # the whole table (a lookup builds it)
            if self.relative_norm is not None:
                rel_embeddings = self.relative_norm(rel_embeddings)
        for block in self.blocks:
            x = block(x, allowed, relative, rel_embeddings, training=training)
        return x

    def input_embeddings(self) -> tf_keras.layers.Layer:
        return self.words

    def torch_params(self) -> Iterator[TorchParam]:
        yield from embedding_params(f"{PREFIX}.embeddings.word_embeddings", self.words)
        if self.positions is not None:
            yield from embedding_params(f"{PREFIX}.embeddings.position_embeddings", self.positions)
        if self.token_types is not None:
            yield from embedding_params(f"{PREFIX}.embeddings.token_type_embeddings", self.token_types)
        if self.project is not None:
            yield from dense_params(f"{PREFIX}.embeddings.embed_proj", self.project)
        yield from norm_params(f"{PREFIX}.embeddings.LayerNorm", self.embedding_norm)
        if self.relative is not None:
            yield from embedding_params(f"{PREFIX}.encoder.rel_embeddings", self.relative)
        if self.relative_norm is not None:
            yield from norm_params(f"{PREFIX}.encoder.LayerNorm", self.relative_norm)
        for i, block in enumerate(self.blocks):
            yield from block.torch_params(f"{PREFIX}.encoder.layer.{i}")


class Head(tf_keras.layers.Layer):
    """ContextPooler (dropout, dense, activation on the first token), dropout, classifier."""

    def __init__(self, config: dict, num_labels: int, **kwargs):
        super().__init__(**kwargs)
        self.sizes = sizes = Sizes.of(config)
        self.pooler_dropout = Dropout(sizes.pooler_dropout)
        self.pooler = dense(sizes.hidden, "pooler", std=sizes.init_std)
        self.dropout = Dropout(sizes.classifier_dropout)
        self.classifier = dense(num_labels, "classifier", std=sizes.init_std)
        self.act = activation(sizes.pooler_activation)

    def call(self, hidden, attention_mask=None, training=False):
        pooled = self.act(self.pooler(self.pooler_dropout(hidden[:, 0], training=training)))
        return self.classifier(self.dropout(pooled, training=training))

    def torch_params(self) -> Iterator[TorchParam]:
        yield from dense_params("pooler.dense", self.pooler)
        yield from dense_params("classifier", self.classifier)


def warmup_ratio(model_type: str) -> float | None:
    return None  # the recipe's default warm-up
