"""The BERT family as one encoder whose members differ only by config: BERT and MiniLM, RoBERTa, XLM-R and
CamemBERT, ELECTRA's discriminator, DistilBERT, ALBERT, MPNet.

All are post-norm transformers with learned absolute positions (Devlin et al. 2019); what differs is declared in a
Flavor: the PyTorch names, where positions start (RoBERTa counts from the padding id), whether token types exist,
ELECTRA's and ALBERT's smaller embeddings projected up, ALBERT's layers sharing one set of weights per group (and
no dropout after its feed-forward), MPNet's bucketed relative position bias on every layer's scores, and each
family's sequence-classification head exactly as transformers defines
it (BERT's and ALBERT's tanh pooler, RoBERTa's and ELECTRA's two-layer heads, DistilBERT's ReLU pre-classifier).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator

import tensorflow as tf
import tf_keras

from models.encoders import packed_rows
from models.encoders.activations import DenseAfterActivation, activation
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
    truncated_normal,
)
from models.encoders.norms import layer_norm
from models.names import POSITION_IDS

BERT_HEAD, ROBERTA_HEAD, ELECTRA_HEAD, DISTILBERT_HEAD, ALBERT_HEAD = (
    "bert",
    "roberta",
    "electra",
    "distilbert",
    "albert",
)
# the activation between the head's two dense layers, per head kind (each transformers class's own)
HEAD_ACTIVATIONS = {
    BERT_HEAD: "tanh", ALBERT_HEAD: "tanh", ROBERTA_HEAD: "tanh", DISTILBERT_HEAD: "relu", ELECTRA_HEAD: "gelu",
}  # fmt: skip
POOLINGS = ("cls", "mean")  # config.json's classifier_pooling: the first token (the family's own) or the masked mean

FEED_FORWARD_MATRICES = 2  # up, down
OTHER_PREFIXES: tuple[str, ...] = ()  # its checkpoints use one prefix


@dataclasses.dataclass(frozen=True)
class Flavor:
    prefix: str  # the encoder's PyTorch prefix in a ...ForSequenceClassification state dict
    layers: str  # where the blocks sit under it
    names: dict[str, str]  # block part -> its PyTorch name
    head: str
    positions_from_padding: bool = False  # RoBERTa's create_position_ids_from_input_ids
    classifier: str = "transformers' class name"
    projection: str = "embeddings_project"  # where narrower embeddings are projected up, under the prefix
    always_project: bool = False  # ALBERT projects even embeddings as wide as its blocks
    grouped: bool = False  # ALBERT: num_hidden_groups sets of inner_group_num blocks, each group reused
    feed_forward_dropout: bool = True  # ALBERT applies none after its feed-forward
    token_types: bool = True  # MPNet has no token-type table
    relative_buckets: bool = False  # MPNet adds T5-style bucketed relative position biases to every layer's scores
    warmup_ratio: float | None = None  # its fine-tuning recipe's warm-up, where it differs from BERT's (recipe.py)


_BERT_BLOCK = {
    "query": "attention.self.query",
    "key": "attention.self.key",
    "value": "attention.self.value",
    "attention_out": "attention.output.dense",
    "attention_norm": "attention.output.LayerNorm",
    "up": "intermediate.dense",
    "down": "output.dense",
    "output_norm": "output.LayerNorm",
}
_DISTILBERT_BLOCK = {
    "query": "attention.q_lin",
    "key": "attention.k_lin",
    "value": "attention.v_lin",
    "attention_out": "attention.out_lin",
    "attention_norm": "sa_layer_norm",
    "up": "ffn.lin1",
    "down": "ffn.lin2",
    "output_norm": "output_layer_norm",
}
_ALBERT_BLOCK = {
    "query": "attention.query",
    "key": "attention.key",
    "value": "attention.value",
    "attention_out": "attention.dense",
    "attention_norm": "attention.LayerNorm",
    "up": "ffn",
    "down": "ffn_output",
    "output_norm": "full_layer_layer_norm",
}
_MPNET_BLOCK = {
    "query": "attention.attn.q",
    "key": "attention.attn.k",
    "value": "attention.attn.v",
    "attention_out": "attention.attn.o",
    "attention_norm": "attention.LayerNorm",
    "up": "intermediate.dense",
    "down": "output.dense",
    "output_norm": "output.LayerNorm",
}
# RoBERTa's recipe warms up over 6% of the steps (Liu et al. 2019, table 10); XLM-R and CamemBERT follow it.
_ROBERTA = Flavor(
    "roberta", "encoder.layer", _BERT_BLOCK, ROBERTA_HEAD, positions_from_padding=True, warmup_ratio=0.06
)

FLAVORS = {
    "bert": Flavor("bert", "encoder.layer", _BERT_BLOCK, BERT_HEAD, classifier="BertForSequenceClassification"),
    "roberta": dataclasses.replace(_ROBERTA, classifier="RobertaForSequenceClassification"),
    "xlm-roberta": dataclasses.replace(_ROBERTA, classifier="XLMRobertaForSequenceClassification"),
    "camembert": dataclasses.replace(_ROBERTA, classifier="CamembertForSequenceClassification"),
    "electra": Flavor(
        "electra", "encoder.layer", _BERT_BLOCK, ELECTRA_HEAD, classifier="ElectraForSequenceClassification"
    ),
    "distilbert": Flavor(
        "distilbert",
        "transformer.layer",
        _DISTILBERT_BLOCK,
        DISTILBERT_HEAD,
        classifier="DistilBertForSequenceClassification",
    ),
    "mpnet": Flavor(
        "mpnet",
        "encoder.layer",
        _MPNET_BLOCK,
        ROBERTA_HEAD,
        positions_from_padding=True,
        classifier="MPNetForSequenceClassification",
        token_types=False,
        relative_buckets=True,
    ),
    "albert": Flavor(
        "albert",
        "encoder.albert_layer_groups",
        _ALBERT_BLOCK,
        ALBERT_HEAD,
        classifier="AlbertForSequenceClassification",
        projection="encoder.embedding_hidden_mapping_in",
        always_project=True,
        grouped=True,
        feed_forward_dropout=False,
    ),
}


@dataclasses.dataclass(frozen=True)
class Sizes:
    """config.json's sizes under one set of names (DistilBERT names them its own way)."""

    vocab: int
    hidden: int
    embedding: int  # ELECTRA's embeddings may be narrower than its blocks
    intermediate: int
    layers: int
    heads: int
    positions: int
    token_types: int
    activation: str
    hidden_dropout: float
    attention_dropout: float
    classifier_dropout: float
    epsilon: float
    pad_id: int
    init_std: float
    pooling: str = "cls"  # config.json's classifier_pooling (POOLINGS)

    @property
    def activations(self) -> tuple[str, ...]:
        return (self.activation,)

    @property
    def block_dropout(self) -> None:
        return None  # its blocks are never recomputed (layers.run_block)

    @classmethod
    def of(cls, config: dict) -> Sizes:
        pooling = config.get("classifier_pooling", "cls")
        if pooling not in POOLINGS:
            raise UnsupportedConfigError(f"classifier_pooling '{pooling}' (BERT's family pools {', '.join(POOLINGS)})")
        if config["model_type"] == "distilbert":
            return cls(
                vocab=config["vocab_size"], hidden=config["dim"], embedding=config["dim"],
                intermediate=config["hidden_dim"], layers=config["n_layers"], heads=config["n_heads"],
                positions=config["max_position_embeddings"], token_types=0, activation=config.get("activation", "gelu"),
                hidden_dropout=config.get("dropout", 0.1), attention_dropout=config.get("attention_dropout", 0.1),
                classifier_dropout=config.get("seq_classif_dropout", 0.2), epsilon=1e-12,
                pad_id=config.get("pad_token_id") or 0, init_std=config.get("initializer_range", 0.02),
                pooling=pooling,
            )  # fmt: skip
        kind = config.get("position_embedding_type", "absolute")
        if kind != "absolute":
            raise UnsupportedConfigError(f"position_embedding_type '{kind}' (only 'absolute' positions are computed)")
        hidden_dropout = config.get("hidden_dropout_prob", 0.1)
        classifier_dropout = config.get("classifier_dropout", config.get("classifier_dropout_prob"))
        return cls(
            vocab=config["vocab_size"], hidden=config["hidden_size"],
            embedding=config.get("embedding_size") or config["hidden_size"],
            intermediate=config["intermediate_size"], layers=config["num_hidden_layers"],
            heads=config["num_attention_heads"], positions=config["max_position_embeddings"],
            token_types=config.get("type_vocab_size", 2) if FLAVORS[config["model_type"]].token_types else 0,
            activation=config.get("hidden_act", "gelu"),
            hidden_dropout=hidden_dropout, attention_dropout=config.get("attention_probs_dropout_prob", 0.1),
            classifier_dropout=hidden_dropout if classifier_dropout is None else classifier_dropout,
            epsilon=config.get("layer_norm_eps", 1e-12), pad_id=config.get("pad_token_id") or 0,
            init_std=config.get("initializer_range", 0.02), pooling=pooling,
        )  # fmt: skip


def position_limit(config: dict) -> int:
    """The longest input the position table holds: RoBERTa's family numbers positions from the padding id + 1."""
    sizes, flavor = Sizes.of(config), FLAVORS[config["model_type"]]
    return sizes.positions - sizes.pad_id - 1 if flavor.positions_from_padding else sizes.positions


def describe(sizes: Sizes) -> str:
    """Learned absolute positions (the position count says it all); a mean-pooling head is said."""
    return "; the head reads the mean of the tokens" if sizes.pooling == "mean" else ""


def warmup_ratio(model_type: str) -> float | None:
    return FLAVORS[model_type].warmup_ratio


def relative_position_buckets(width: tf.Tensor, buckets: int, max_distance: int = 128) -> tf.Tensor:
    """[T, T] MPNet's bucket of each (query, key) pair (its relative_position_bucket, T5's bidirectional rule): half
    the buckets per direction, exact up to a quarter of them, then logarithmic up to max_distance."""
    positions = tf.range(width)
    n = positions[:, tf.newaxis] - positions[tf.newaxis, :]  # query - key: -(key - query), as MPNet computes it
    half = buckets // 2
    exact = half // 2
    distance = tf.abs(n)
    scaled = tf.math.log(tf.cast(tf.maximum(distance, 1), tf.float32) / exact) / math.log(max_distance / exact)
    large = tf.minimum(exact + tf.cast(scaled * (half - exact), tf.int32), half - 1)
    return tf.cast(n < 0, tf.int32) * half + tf.where(distance < exact, distance, large)


class Embeddings(tf_keras.layers.Layer):
    """Word + position (+ token type) embeddings, LayerNorm, dropout; ELECTRA's projected up to the blocks' width."""

    def __init__(self, sizes: Sizes, flavor: Flavor, **kwargs):
        super().__init__(**kwargs)
        self.sizes, self.flavor = sizes, flavor
        width, std = sizes.embedding, sizes.init_std
        self.words = embedding(sizes.vocab, width, "word_embeddings", std=std)
        self.positions = embedding(sizes.positions, width, "position_embeddings", std=std)
        types = sizes.token_types
        self.token_types = embedding(types, width, "token_type_embeddings", std=std) if types else None
        self.norm = layer_norm(sizes.epsilon, "LayerNorm")
        self.dropout = Dropout(sizes.hidden_dropout)
        wider = flavor.always_project or sizes.embedding != sizes.hidden
        self.project = dense(sizes.hidden, "embeddings_project", std=sizes.init_std) if wider else None

    def call(self, input_ids, token_type_ids=None, training=False, position_ids=None):
        """`position_ids`: each token's position in its own text, where rows hold several (packed_rows.py)."""
        if self.flavor.positions_from_padding and position_ids is None:
            real = tf.cast(tf.not_equal(input_ids, self.sizes.pad_id), input_ids.dtype)
            position_ids = tf.cumsum(real, axis=1) * real + self.sizes.pad_id
        elif self.flavor.positions_from_padding:  # RoBERTa's first token sits at the padding id + 1
            position_ids = position_ids + self.sizes.pad_id + 1
        elif position_ids is None:
            position_ids = tf.range(tf.shape(input_ids)[1])[tf.newaxis, :]
        x = self.words(input_ids) + self.positions(position_ids)
        if self.token_types is not None:
            types = tf.zeros_like(input_ids) if token_type_ids is None else token_type_ids
            x = x + self.token_types(types)
        x = self.dropout(self.norm(x), training=training)
        return self.project(x) if self.project is not None else x

    def torch_params(self, prefix: str) -> Iterator[TorchParam]:
        yield from embedding_params(f"{prefix}.word_embeddings", self.words)
        yield from embedding_params(f"{prefix}.position_embeddings", self.positions)
        if self.token_types is not None:
            yield from embedding_params(f"{prefix}.token_type_embeddings", self.token_types)
        yield from norm_params(f"{prefix}.LayerNorm", self.norm)


class Block(BoundedWidth, tf_keras.layers.Layer):
    """Self-attention, add & LayerNorm, feed-forward, add & LayerNorm (post-norm)."""

    def __init__(self, sizes: Sizes, names: dict[str, str], feed_forward_dropout: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.sizes, self.names, self.feed_forward_dropout = sizes, names, feed_forward_dropout
        h, std = sizes.hidden, sizes.init_std
        self.query, self.key, self.value = (dense(h, part, std=std) for part in ("query", "key", "value"))
        self.attention_out = dense(h, "attention_out", std=std)
        self.attention_norm = layer_norm(sizes.epsilon, "attention_LayerNorm")
        self.up = dense(sizes.intermediate, "up", std=std)
        # down(act(up(x))): the activation is down's, whose backward pass keeps up's output alone
        self.down = DenseAfterActivation(
            h, activation(sizes.activation), kernel_initializer=truncated_normal(std), name="down"
        )
        self.output_norm = layer_norm(sizes.epsilon, "output_LayerNorm")
        self.attention_dropout = Dropout(sizes.attention_dropout)
        self.hidden_dropout = Dropout(sizes.hidden_dropout)

    def call(self, x, bias, training=False):
        heads = self.sizes.heads
        q, k, v = (split_heads(layer(x), heads) for layer in (self.query, self.key, self.value))
        return self.after_attention(
            x, scaled_dot_attention(q, k, v, bias, self.attention_dropout, training, bounds=self), training
        )

    def after_attention(self, x, attended, training):
        """[B, T, H] block input and [B, H, T, D] attention output -> the block's output (what every post-norm
        block shares; DeBERTa's differs only in how it attends)."""
        x = self.attention_norm(x + self.hidden_dropout(self.attention_out(merge_heads(attended)), training=training))
        inner = self.down(self.up(x), training=training)
        if self.feed_forward_dropout:
            inner = self.hidden_dropout(inner, training=training)
        return self.output_norm(x + inner)

    def torch_params(self, prefix: str) -> Iterator[TorchParam]:
        for part in ("query", "key", "value", "attention_out", "up", "down"):
            yield from dense_params(f"{prefix}.{self.names[part]}", getattr(self, part))
        yield from norm_params(f"{prefix}.{self.names['attention_norm']}", self.attention_norm)
        yield from norm_params(f"{prefix}.{self.names['output_norm']}", self.output_norm)


class Encoder(tf_keras.layers.Layer):
    """input ids (+ token types) and the attention mask -> the last hidden states [B, T, H]."""

    def __init__(self, config: dict, **kwargs):
        super().__init__(**kwargs)
        self.sizes, self.flavor = sizes, flavor = Sizes.of(config), FLAVORS[config["model_type"]]
        self.embeddings = Embeddings(sizes, flavor, name="embeddings")
        # ALBERT: layer i runs group int(i / (layers / groups)), each group `inner` blocks; the others: a block a layer
        self.groups = config.get("num_hidden_groups", 1) if flavor.grouped else sizes.layers
        self.inner = config.get("inner_group_num", 1) if flavor.grouped else 1
        self.blocks = [
            Block(sizes, flavor.names, flavor.feed_forward_dropout, name=f"layer_{i}")
            for i in range(self.groups * self.inner)
        ]
        self.buckets = config.get("relative_attention_num_buckets", 32)
        self.relative_bias = (
            embedding(self.buckets, sizes.heads, "relative_attention_bias", std=sizes.init_std)
            if flavor.relative_buckets
            else None
        )

    def call(self, inputs: dict, training=False):
        x = self.embeddings(
            inputs["input_ids"], inputs.get("token_type_ids"), training=training, position_ids=inputs.get(POSITION_IDS)
        )
        bias = attention_bias(packed_rows.allowed_keys(inputs))
        if self.relative_bias is not None:  # [T, T, H] -> [1, H, T, T], added to every layer's scores
            buckets = relative_position_buckets(tf.shape(x)[1], self.buckets)
            bias += tf.cast(tf.transpose(self.relative_bias(buckets), [2, 0, 1])[tf.newaxis], tf.float32)
        for layer in range(self.sizes.layers):
            group = int(layer / (self.sizes.layers / self.groups))
            for block in self.blocks[group * self.inner : (group + 1) * self.inner]:
                x = block(x, bias, training=training)
        return x

    def input_embeddings(self) -> tf_keras.layers.Layer:
        return self.embeddings

    def torch_params(self) -> Iterator[TorchParam]:
        prefix = self.flavor.prefix
        yield from self.embeddings.torch_params(f"{prefix}.embeddings")
        if self.embeddings.project is not None:
            yield from dense_params(f"{prefix}.{self.flavor.projection}", self.embeddings.project)
        if self.relative_bias is not None:
            yield from embedding_params(f"{prefix}.encoder.relative_attention_bias", self.relative_bias)
        for i, block in enumerate(self.blocks):
            where = f"{i // self.inner}.albert_layers.{i % self.inner}" if self.flavor.grouped else str(i)
            yield from block.torch_params(f"{prefix}.{self.flavor.layers}.{where}")


class Head(tf_keras.layers.Layer):
    """The family's sequence-classification head, as its transformers class defines it, on the first token; or on
    the masked mean of the tokens where config.json's classifier_pooling says `mean` (what a sentence-transformers
    checkpoint was trained to pool; no transformers class of the family computes it: hf_export writes such a
    model in the sentence-transformers layout)."""

    def __init__(self, config: dict, num_labels: int, **kwargs):
        super().__init__(**kwargs)
        sizes, self.flavor = Sizes.of(config), FLAVORS[config["model_type"]]
        self.kind, self.pooling = self.flavor.head, sizes.pooling
        self.activation_name = HEAD_ACTIVATIONS[self.kind]
        self.dropout = Dropout(sizes.classifier_dropout)
        self.inner = dense(sizes.hidden, "inner", std=sizes.init_std)
        self.out = dense(num_labels, "classifier", std=sizes.init_std)

    def call(self, hidden, attention_mask=None, training=False):
        first = hidden[:, 0] if self.pooling == "cls" else masked_mean(hidden, attention_mask)
        act = activation(self.activation_name)
        if self.kind in (BERT_HEAD, ALBERT_HEAD, DISTILBERT_HEAD):  # pooler: dense + act, dropout, the classifier
            return self.out(self.dropout(act(self.inner(first)), training=training))
        x = self.dropout(first, training=training)
        return self.out(self.dropout(act(self.inner(x)), training=training))

    def torch_params(self) -> Iterator[TorchParam]:
        prefix = self.flavor.prefix
        inner, out = {
            BERT_HEAD: (f"{prefix}.pooler.dense", "classifier"),
            ALBERT_HEAD: (f"{prefix}.pooler", "classifier"),
            DISTILBERT_HEAD: ("pre_classifier", "classifier"),
        }.get(self.kind, ("classifier.dense", "classifier.out_proj"))
        yield from dense_params(inner, self.inner)
        yield from dense_params(out, self.out)
