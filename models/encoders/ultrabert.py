"""UltraBERT (dmis-lab/UltraBERT), as transformers 5's UltrabertForSequenceClassification computes it.

EuroBERT's pre-norm blocks (eurobert.py: RMSNorm, SwiGLU, grouped-query attention, no biases) with 32,768 positions,
a sliding window in two of every three layers (a token sees the keys at most `sliding_window` positions away, 128 by
default) and a RoPE base per layer type (10,000 sliding, 2,560,000 full); a final RMSNorm; the classifier reads the
first token or the masked mean (ModernBERT's pooling without its prediction head), then dropout and a linear layer.
Local layers attend within the window as ModernBERT's do (a mask over full attention, in query pieces past
long_attention.QUERY_CHUNK, so memory stays linear in the width).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import tensorflow as tf
import tf_keras

from models.encoders import eurobert
from models.encoders.dropout import Dropout
from models.encoders.layers import (
    TorchParam,
    UnsupportedConfigError,
    dense,
    dense_params,
    masked_mean,
)
from models.encoders.rotary import default_theta, rotary_tables

PREFIX = "ultrabert"
OTHER_PREFIXES: tuple[str, ...] = ()
FEED_FORWARD_MATRICES = 3  # gate, up, down
FULL, SLIDING = "full_attention", "sliding_attention"
DEFAULT_THETA = {SLIDING: 10_000.0, FULL: 2_560_000.0}  # UltrabertConfig's
POOLINGS = ("cls", "mean")


def _layer_types(config: dict) -> tuple[str, ...]:
    """config.json's layer_types; older checkpoints' attention_windows (a window per layer, 0 for full); else two
    sliding layers then a full one, as UltrabertConfig fills them."""
    if config.get("layer_types"):
        return tuple(config["layer_types"])
    if config.get("attention_windows"):
        return tuple(SLIDING if window else FULL for window in config["attention_windows"])
    return tuple(SLIDING if (i + 1) % 3 else FULL for i in range(config["num_hidden_layers"]))


def _thetas(config: dict, kinds: set[str]) -> dict[str, float]:
    """The RoPE base of each layer type: rope_parameters by type, or older checkpoints' rope_theta list by layer."""
    given = config.get("rope_parameters") or {}
    if isinstance(config.get("rope_theta"), list) and not given:
        by_layer = zip(_layer_types(config), config["rope_theta"], strict=False)
        given = {kind: {"rope_theta": theta} for kind, theta in by_layer}
    return {kind: default_theta({"rope_parameters": given.get(kind) or {}}, DEFAULT_THETA[kind]) for kind in kinds}


@dataclasses.dataclass(frozen=True)
class Sizes(eurobert.Sizes):
    layer_types: tuple[str, ...]
    thetas: dict[str, float]
    half_window: int
    classifier_dropout: float

    @classmethod
    def of(cls, config: dict) -> Sizes:
        pooling = config.get("classifier_pooling", "cls")
        if pooling not in POOLINGS:
            raise UnsupportedConfigError(f"classifier_pooling '{pooling}' (UltraBERT pools {', '.join(POOLINGS)})")
        layer_types = _layer_types(config)
        if len(layer_types) != config["num_hidden_layers"] or not set(layer_types) <= {FULL, SLIDING}:
            raise UnsupportedConfigError(f"layer_types {list(layer_types)} (a {FULL} or {SLIDING} a layer)")
        windows = [window for window in config.get("attention_windows") or () if window]
        base = eurobert.Sizes.of({
            **{k: v for k, v in config.items() if k not in ("rope_parameters", "rope_theta", "classifier_pooling")},
            "max_position_embeddings": config.get("max_position_embeddings", 32_768),
            "rms_norm_eps": config.get("rms_norm_eps", 1e-6),
            "classifier_pooling": "bos" if pooling == "cls" else "mean",
        })  # fmt: skip
        return cls(
            **dataclasses.asdict(base), layer_types=layer_types, thetas=_thetas(config, set(layer_types)),
            half_window=int(windows[0] if windows else config.get("sliding_window", 128)),
            classifier_dropout=config.get("classifier_dropout", 0.0),
        )  # fmt: skip


def position_limit(config: dict) -> int:
    return Sizes.of(config).positions


def describe(sizes: Sizes) -> str:
    local = sum(kind == SLIDING for kind in sizes.layer_types)
    thetas = ", ".join(f"{kind.split('_')[0]} {theta:,.0f}" for kind, theta in sorted(sizes.thetas.items()))
    heads = f"{sizes.heads} query heads over {sizes.kv_heads} key/value heads" if sizes.kv_heads < sizes.heads else ""
    return (
        f", {local} of {sizes.layers} layers attend within +-{sizes.half_window} tokens, rotary positions (theta "
        f"{thetas}), RMSNorm, SwiGLU, {heads or 'multi-head'} attention, {sizes.pooling} pooling"
    )


def warmup_ratio(model_type: str) -> float | None:
    return None  # the recipe's default warm-up


class Encoder(eurobert.Encoder):
    SIZES, PREFIX = Sizes, PREFIX

    def make_block(self, sizes: Sizes, index: int) -> eurobert.Block:
        local = sizes.half_window if sizes.layer_types[index] == SLIDING else None
        return eurobert.Block(sizes, local, name=f"layer_{index}")

    def rotary_of_layers(self, at: tf.Tensor) -> list[tuple[tf.Tensor, tf.Tensor]]:
        """Each block's rotary tables: its layer type's theta."""
        tables = {kind: rotary_tables(at, self.sizes.head_dim, theta) for kind, theta in self.sizes.thetas.items()}
        return [tables[kind] for kind in self.sizes.layer_types]


class Head(tf_keras.layers.Layer):
    """The first token or the masked mean, dropout, the classifier."""

    def __init__(self, config: dict, num_labels: int, **kwargs):
        super().__init__(**kwargs)
        self.sizes = sizes = Sizes.of(config)
        self.dropout = Dropout(sizes.classifier_dropout)
        self.classifier = dense(num_labels, "classifier", std=sizes.init_std)

    def call(self, hidden, attention_mask=None, training=False):
        pooled = hidden[:, 0] if self.sizes.pooling == "bos" else masked_mean(hidden, attention_mask)
        return self.classifier(self.dropout(pooled, training=training))

    def torch_params(self) -> Iterator[TorchParam]:
        yield from dense_params("classifier", self.classifier)
