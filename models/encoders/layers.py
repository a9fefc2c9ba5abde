"""What every encoder's layers share: each variable's name in a PyTorch state dict, declared where the layer is made
(loading and exporting are one table walked both ways), the initializers, the widths a layer is bound to, blocks
recomputed in the backward pass, and the error for a config an encoder does not compute. The layers themselves are
tf_keras ones (Dense, Embedding, Dropout) or ours by job: norms.py, activations.py, attention.py.
tf_keras, not Keras 3: TFT and TFMA load the SavedModel through Keras 2, and Keras 3 SavedModels have a known failure
class in BulkInferrer and serving (tfx#7782, keras#19274).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import tensorflow as tf
import tf_keras

from models.errors import UserError


@dataclasses.dataclass(frozen=True)
class TorchParam:
    """One variable under its PyTorch name; `transpose` for nn.Linear weights ([out, in] there, [in, out] here)."""

    name: str
    variable: tf.Variable
    transpose: bool = False

def masked_mean(hidden: tf.Tensor, attention_mask: tf.Tensor) -> tf.Tensor:
    """[texts, hidden]: the mean of each text's hidden states over its tokens (mask 1), as sentence-transformers'
    mean pooling and transformers' mean-pooling heads compute it; a text of no tokens gives zeros, not NaN."""
    mask = tf.cast(attention_mask, hidden.dtype)[:, :, tf.newaxis]
    return tf.reduce_sum(hidden * mask, axis=1) / tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)


def truncated_normal(std: float) -> tf_keras.initializers.Initializer:
    """transformers' init for weights a checkpoint lacks (a new head): a normal cut at two standard deviations."""
    return tf_keras.initializers.TruncatedNormal(stddev=std)

def dense(units: int, name: str, *, use_bias: bool = True, std: float = 0.02) -> tf_keras.layers.Dense:
    return tf_keras.layers.Dense(units, use_bias=use_bias, kernel_initializer=truncated_normal(std), name=name)

def embedding(rows: int, width: int, name: str, *, std: float = 0.02) -> tf_keras.layers.Embedding:
    return tf_keras.layers.Embedding(rows, width, embeddings_initializer=truncated_normal(std), name=name)

def backward_scope(*inner: str) -> str:
    """The absolute name scope a custom gradient's ops go in: as autodiff names a gradient (gradient_tape/ and the
    forward op's scope, here the current one and `inner`), which is how benchmarks/step_profile.py sorts ops."""
    return "/".join(filter(None, ("gradient_tape", tf.get_current_name_scope(), *inner))) + "/"

def dense_params(name: str, layer: tf_keras.layers.Dense) -> Iterator[TorchParam]:
    yield TorchParam(f"{name}.weight", layer.kernel, transpose=True)
    if layer.use_bias:
        yield TorchParam(f"{name}.bias", layer.bias)

def norm_params(name: str, layer: tf_keras.layers.LayerNormalization) -> Iterator[TorchParam]:
    yield TorchParam(f"{name}.weight", layer.gamma)
    if layer.center:
        yield TorchParam(f"{name}.bias", layer.beta)

def embedding_params(name: str, layer: tf_keras.layers.Embedding) -> Iterator[TorchParam]:
    yield TorchParam(f"{name}.weight", layer.embeddings)

class BoundedWidth:
    """What a layer whose way of computing depends on the batch's size mixes in (those calling scaled_dot_attention,
    DenseAfterActivation): the widest batch it is given and, where rows arrive in numbers known only at run time
    (packed rows), the most; set on every such layer of a model by bound_width (the Trainer: the run's
    max_seq_length and a replica's batch) before its steps and signatures are traced."""

    widest: int | None = None
    most_rows: int | None = None

class UnsupportedConfigError(UserError, ValueError):
    """The checkpoint's config.json asks for something this encoder does not compute; the message says what."""

def bound_width(model: tf_keras.layers.Layer, widest: int, most_rows: int | None = None) -> None:
    """Every BoundedWidth layer of `model` told the widest batch it will see (and the most rows, where known)."""
    for layer in model.submodules:
        if isinstance(layer, BoundedWidth):
            layer.widest, layer.most_rows = widest, most_rows

def run_block(block, x: tf.Tensor, *args, training, recompute: bool) -> tf.Tensor:
    """One block's forward pass; with `recompute` (in training) the step keeps only the block's input for the
    backward pass, which runs the block again (tf.recompute_grad): one block's activations alive instead of every
    block's, for about a third more compute. Exact only where the block draws no random numbers (its dropout at 0:
    the recomputation would draw other masks), when the Trainer chooses it (classifier.can_recompute_blocks)."""
    if not (recompute and training):
        return block(x, *args, training=training)
    return tf.recompute_grad(lambda inner: block(inner, *args, training=training))(x)
