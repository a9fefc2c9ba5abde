"""The recomputed attention's forward and gradients are plain attention's, dropout mask included; recomputed blocks'
gradients are kept blocks'."""

import math
import os

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from models.encoders import long_attention
from models.encoders.attention import _sum_to_shape, head_seed, of_head, recomputed_attention
from models.encoders.dropout import drawn_rate, keep_mask


def _plain(q, k, v, bias, seed, rate):
    """Attention as autodiff sees it, with the same stateless mask (drawn a head at a time, as it runs them)."""
    probabilities = tf.nn.softmax(tf.matmul(q, k, transpose_b=True) / math.sqrt(q.shape[-1]) + bias, axis=-1)
    if rate:
        shape = tf.shape(of_head(probabilities, 0))
        keep = tf.concat([keep_mask(shape, head_seed(seed, h), rate) for h in range(q.shape[1])], 1)
        probabilities *= tf.cast(keep, tf.float32) / (1 - drawn_rate(rate))
    return tf.matmul(probabilities, v)


@pytest.mark.parametrize("rate", [0.0, 0.3])
@pytest.mark.parametrize("bias_shape", [(2, 1, 1, 6), (2, 3, 6, 6), (1, 3, 6, 6)], ids=["mask", "full", "shared"])
def test_forward_and_gradients_match_autodiff(rate, bias_shape):
    rng = np.random.default_rng(0)
    q, k, v = (tf.constant(rng.normal(size=(2, 3, 6, 4)), tf.float32) for _ in range(3))
    bias = tf.constant(rng.normal(size=bias_shape), tf.float32)
    seed = tf.constant([7, 11])
    upstream = tf.constant(rng.normal(size=(2, 3, 6, 4)), tf.float32)
    answers = []
    for attend in (recomputed_attention, _plain):
        with tf.GradientTape() as tape:
            tape.watch([q, k, v, bias])
            out = attend(q, k, v, bias, seed, rate)
            loss = tf.reduce_sum(out * upstream)
        answers.append([out, *tape.gradient(loss, [q, k, v, bias])])
    for ours, theirs in zip(*answers, strict=True):
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-5)


def test_a_broadcast_gradient_is_summed_back_to_its_input_shape():
    gradient = tf.ones([2, 3, 4, 4])
    assert _sum_to_shape(gradient, tf.zeros([2, 1, 1, 4])).numpy().tolist() == [[[[12.0] * 4]]] * 2


_TINY = {
    "vocab_size": 50, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 2,
    "max_position_embeddings": 20, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
}  # fmt: skip
# DeBERTa-v3's disentangled attention runs through the same core, its c2p and p2c scores the bias
TINY_CONFIGS = {
    "bert": {"model_type": "bert", **_TINY},
    "deberta-v3": {
        "model_type": "deberta-v2", "relative_attention": True, "position_biased_input": False,
        "pos_att_type": ["p2c", "c2p"], "position_buckets": 4, "share_att_key": True, "norm_rel_ebd": "layer_norm",
        "type_vocab_size": 0, **_TINY,
    },
}  # fmt: skip


def _tiny_bert_gradients(family: str = "bert"):
    """A 2-layer encoder without dropout (both ways of attending compute the same function) and a function of its
    training gradients on 4 texts of 12 tokens (3 of them padding)."""
    from models.encoders import classifier

    model = classifier.build(TINY_CONFIGS[family], ["a", "b"])
    ids = tf.constant(np.random.default_rng(0).integers(1, 50, (4, 12)))
    inputs = {"input_ids": ids, "attention_mask": tf.concat([tf.ones([4, 9], tf.int64), tf.zeros([4, 3], tf.int64)], 1)}

    def gradients():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(inputs, training=True) ** 2)
        return [tf.convert_to_tensor(g) for g in tape.gradient(loss, model.trainable_variables)]

    return gradients


@pytest.mark.parametrize("family", sorted(TINY_CONFIGS))
@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_a_model_trains_the_same_with_its_attention_recomputed(monkeypatch, jit_compile, family):
    """Through a whole encoder, eager and under XLA."""
    from models.encoders import attention

    gradients = tf.function(_tiny_bert_gradients(family), jit_compile=jit_compile)
    kept = gradients()
    monkeypatch.setattr(attention, "RECOMPUTE_ABOVE_BYTES", 0)
    assert attention.kept_bytes([4, 2, 12, 8]) > attention.RECOMPUTE_ABOVE_BYTES
    recomputed = (
        gradients.python_function() if not jit_compile else tf.function(gradients.python_function, jit_compile=True)()
    )
    for ours, theirs in zip(recomputed, kept, strict=True):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("family", sorted(TINY_CONFIGS))
def test_past_query_chunk_a_static_width_loops_over_pieces_and_under_xla_unrolls_them(monkeypatch, family):
    """The loop holds one piece at a time; XLA (a TPU) compiles only static slices, so it gets the unrolled pieces.
    Both give the gradients of attention computed whole."""
    gradients = _tiny_bert_gradients(family)
    whole = tf.function(gradients)()
    monkeypatch.setattr(long_attention, "QUERY_CHUNK", 5)  # 12 tokens: three pieces
    looped = tf.function(gradients)
    assert any(op.type in ("While", "StatelessWhile") for op in looped.get_concrete_function().graph.get_operations())
    for pieces in (looped(), tf.function(gradients, jit_compile=True)()):
        for ours, theirs in zip(pieces, whole, strict=True):
            np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("pieces", [False, True], ids=["whole", "in-pieces"])
def test_recomputed_blocks_give_the_kept_blocks_gradients(pieces, monkeypatch):
    """layers.run_block: a training step that keeps only each block's input gets the same loss and gradients as one
    that keeps everything (ModernBERT's blocks hold no dropout), also with attention in pieces."""
    from models.encoders import classifier, long_attention

    if pieces:
        monkeypatch.setattr(long_attention, "QUERY_CHUNK", 8)
    config = {
        "model_type": "modernbert", "vocab_size": 60, "hidden_size": 16, "intermediate_size": 24,
        "num_hidden_layers": 3, "num_attention_heads": 2, "local_attention": 4, "max_position_embeddings": 64,
    }  # fmt: skip
    assert classifier.can_recompute_blocks(classifier.block_dropout(config))
    ids = tf.constant([[2, 7, 9, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 3, 0]] * 2)
    inputs = {"input_ids": ids, "attention_mask": tf.cast(ids > 0, tf.int32)}

    def loss_and_gradients(recompute):
        tf_keras.utils.set_random_seed(0)
        model = classifier.build(config, ["a", "b"])
        if recompute:
            model.recompute_blocks()

        @tf.function
        def step():
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(model(inputs, training=True) ** 2)
            gradients = tape.gradient(loss, model.trainable_variables)  # the embeddings': slices where kept
            return loss, [None if g is None else tf.convert_to_tensor(g) for g in gradients]

        return step()

    (kept_loss, kept), (loss, recomputed) = loss_and_gradients(False), loss_and_gradients(True)
    np.testing.assert_allclose(loss.numpy(), kept_loss.numpy(), rtol=1e-6)
    assert len(recomputed) == len(kept) and all(g is not None for g in recomputed)
    for ours, theirs in zip(recomputed, kept, strict=True):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("name", "approximate"), [("gelu", False), ("gelu_pytorch_tanh", True)])
@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_gelu_gives_tensorflows_values_and_gradients(name, approximate, dtype):
    from models.encoders.activations import activation

    x = tf.cast(tf.linspace(-8.0, 8.0, 4001), dtype)
    gradients = []
    for function in (activation(name), lambda x: tf.nn.gelu(x, approximate=approximate)):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = function(x)
            loss = tf.reduce_sum(tf.cast(y, tf.float32) ** 2)
        gradients.append((y, tape.gradient(loss, x)))
    (ours, our_gradient), (theirs, their_gradient) = gradients
    tolerance = 1e-6 if dtype == tf.float32 else 2e-2
    np.testing.assert_allclose(tf.cast(ours, tf.float32), tf.cast(theirs, tf.float32), rtol=tolerance, atol=tolerance)
    np.testing.assert_allclose(
        tf.cast(our_gradient, tf.float32), tf.cast(their_gradient, tf.float32), rtol=2 * tolerance, atol=tolerance * 10
    )


def _live_peaks(script: str, *variants: str) -> dict[str, int]:
    """TensorFlow's own peak of live tensors (bytes) as `script` prints it for each variant, a fresh process each."""
    import json
    import subprocess
    import sys

    peaks = {}
    for which in variants:
        # TensorFlow counts the CPU allocator's live bytes only with oneDNN on, which it turns on by itself only on
        # CPUs with AVX512-VNNI, AVX512-BF16 or AMX ("Allocator stats not available for device 'CPU:0'" elsewhere)
        env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "1"}
        done = subprocess.run([sys.executable, "-c", script, which], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        peaks[which] = json.loads(done.stdout.strip().splitlines()[-1])
    return peaks


_LIVE_PEAK_OF_GELU = """
import json, sys
import tensorflow as tf
from models.encoders.activations import gelu
x = tf.Variable(tf.random.normal([2048, 4096]))  # 32 MiB
function = gelu if sys.argv[1] == "ours" else (lambda x: tf.nn.gelu(x, approximate=False))

@tf.function
def gradient():
    with tf.GradientTape() as tape:
        hidden = x
        for _ in range(6):  # what each layer keeps adds up over a network
            hidden = function(hidden * 1.01)
        loss = tf.reduce_sum(hidden)
    return tape.gradient(loss, x)

gradient()
print(json.dumps(tf.config.experimental.get_memory_info("CPU:0")["peak"]))
"""


def test_gelus_backward_pass_keeps_its_input_alone():
    """tf.nn.gelu's autodiff keeps several intermediates the size of its input; ours keeps the input. Through six
    of them, as TensorFlow's own peak of live tensors, in a fresh process each."""
    peaks = _live_peaks(_LIVE_PEAK_OF_GELU, "ours", "tensorflow")
    one = 2048 * 4096 * 4
    assert peaks["ours"] <= peaks["tensorflow"] - 6 * one, {k: v / one for k, v in peaks.items()}


@pytest.mark.parametrize("name", ["gelu", "gelu_pytorch_tanh", "relu"])
@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_dense_after_activation_gives_denses_values_and_gradients(name, policy, monkeypatch):
    """DenseAfterActivation(x) against Dense(act(x)) with the same weights: outputs and the gradients of x, the
    kernel and the bias, in a traced training step as the Trainer runs it, recomputing at any size (relu: not
    recomputed, Dense's own path)."""
    import tf_keras

    from models.encoders import activations
    from models.encoders.activations import DenseAfterActivation, activation

    monkeypatch.setattr(activations, "RECOMPUTE_ACTIVATION_ABOVE_BYTES", 0)
    previous = tf_keras.mixed_precision.global_policy()
    tf_keras.mixed_precision.set_global_policy(policy)
    try:
        ours, theirs = DenseAfterActivation(8, activation(name), name="down"), tf_keras.layers.Dense(8, name="down")
        x = tf.cast(tf.random.stateless_normal([3, 5, 16], seed=[1, 2]), ours.compute_dtype)
        ours(x), theirs(x)
        theirs.set_weights(ours.get_weights())
        results = []
        assert ours.recomputes(x, training=True) == (name != "relu")
        for layer, call in ((ours, lambda t: ours(t, training=True)), (theirs, lambda t: theirs(activation(name)(t)))):

            @tf.function
            def step(layer=layer, call=call):
                with tf.GradientTape() as tape:
                    tape.watch(x)
                    y = call(x)
                    loss = tf.reduce_sum(tf.cast(y, tf.float32) ** 2)
                return [y, *tape.gradient(loss, [x, *layer.trainable_variables])]

            results.append([tf.cast(t, tf.float32).numpy() for t in step()])
    finally:
        tf_keras.mixed_precision.set_global_policy(previous)
    tolerance = 1e-5 if policy == "float32" else 2e-2
    assert len(results[0]) == 4
    for a, b in zip(*results, strict=True):
        np.testing.assert_allclose(a, b, rtol=tolerance, atol=tolerance)


_LIVE_PEAK_OF_FEED_FORWARDS = """
import json, sys
import tensorflow as tf, tf_keras
from models.encoders import activations
from models.encoders.activations import DenseAfterActivation, gelu
activations.RECOMPUTE_ACTIVATION_ABOVE_BYTES = 0  # at this small size too
x = tf.Variable(tf.random.normal([2048, 1024]))
count = 8  # feed-forwards, as a network's layers stack them
ups = [tf_keras.layers.Dense(4096) for _ in range(count)]
ours = sys.argv[1] == "ours"
downs = [DenseAfterActivation(1024, gelu) if ours else tf_keras.layers.Dense(1024) for _ in range(count)]

@tf.function
def gradient():
    with tf.GradientTape() as tape:
        hidden = x
        for up, down in zip(ups, downs):
            hidden = down(up(hidden), training=True) if ours else down(gelu(up(hidden)))
        loss = tf.reduce_sum(hidden)
    # the kernels' too: only down's kernel gradient reads GELU's output
    return tape.gradient(loss, [x, *(v for layer in ups + downs for v in layer.trainable_variables)])

gradient()
print(json.dumps(tf.config.experimental.get_memory_info("CPU:0")["peak"]))
"""


def test_dense_after_activation_keeps_the_activations_input_alone():
    """Each feed-forward keeps up's output (32 MiB here) and no longer GELU's output of the same size: through eight,
    at least four such tensors fewer at TensorFlow's own peak of live tensors, in a fresh process each. The peak moves
    by up to two such tensors from run to run with the order TensorFlow's executor runs independent ops in (measured
    6.25 to 9.5 fewer over six pairs; through four, 2.75 to 4.25, which failed a bound of three in CI)."""
    peaks = _live_peaks(_LIVE_PEAK_OF_FEED_FORWARDS, "ours", "dense")
    one = 2048 * 4096 * 4
    assert peaks["ours"] <= peaks["dense"] - 4 * one, {k: v / one for k, v in peaks.items()}


def test_dense_after_activation_recomputes_where_its_activation_would_be_large():
    """At the widest batch the Trainer bounds it to where the width is known only at run time, else at the batch's
    own width: MiniLM's 1,536-wide activation at 32 x 512 (100 MB) is recomputed, at 32 x 128 (25 MB: the default
    run) kept; a batch of unknown size recomputes unless its most rows keep little (packed rows: bound_width's
    most_rows); serving never does."""
    from models.encoders.activations import RECOMPUTE_ACTIVATION_ABOVE_BYTES, DenseAfterActivation, activation
    from models.encoders.layers import bound_width

    layer, shape = DenseAfterActivation(384, activation("gelu")), [32, None, 1536]
    spec = tf.TensorSpec(shape, tf.float32)
    assert layer.recomputes(spec, training=True)  # not bound: the width is not known
    for widest, recomputes in ((512, True), (128, False)):
        bound_width(tf_keras_model_holding(layer), widest)
        assert layer.widest == widest and layer.recomputes(spec, training=True) is recomputes
        assert not layer.recomputes(spec, training=False)
    assert 32 * 128 * 1536 * 4 < RECOMPUTE_ACTIVATION_ABOVE_BYTES < 32 * 512 * 1536 * 4
    rows_at_run_time = tf.TensorSpec([None, None, 1536], tf.float32)  # packed: as many rows as the texts fill
    assert layer.recomputes(rows_at_run_time, training=True)
    for most_rows, recomputes in ((32, False), (128, True)):  # at most 32 x 128 (the bound above): kept
        bound_width(tf_keras_model_holding(layer), 128, most_rows)
        assert layer.recomputes(rows_at_run_time, training=True) is recomputes
    assert not DenseAfterActivation(384, activation("relu")).recomputes(spec, training=True)
    bound_width(tf_keras_model_holding(layer), 512, 32)  # the Trainer's batch widths up to 512: each step its own
    for width, recomputes in ((512, True), (384, True), (128, False)):
        assert layer.recomputes(tf.TensorSpec([32, width, 1536], tf.float32), training=True) is recomputes


def tf_keras_model_holding(layer):
    """A model whose submodules hold `layer`, as an encoder holds its blocks' layers."""
    import tf_keras

    class Holder(tf_keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.inner = layer

    return Holder()


@pytest.mark.parametrize("center", [True, False], ids=["with_beta", "without_beta"])
@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_layer_norm_gives_keras_values_and_gradients(center, policy):
    """Our LayerNorm (its gradient written out) against tf_keras' LayerNormalization with the same weights and BERT's
    epsilon: outputs and the gradients of x, gamma and beta in a traced step, on inputs far from zero mean."""
    from models.encoders.norms import layer_norm

    previous = tf_keras.mixed_precision.global_policy()
    tf_keras.mixed_precision.set_global_policy(policy)
    try:
        ours = layer_norm(1e-12, "LayerNorm", center=center)
        theirs = tf_keras.layers.LayerNormalization(epsilon=1e-12, center=center, name="LayerNorm")
        x = tf.cast(3.0 + 2.0 * tf.random.stateless_normal([3, 5, 16], seed=[3, 4]), ours.compute_dtype)
        upstream = tf.random.stateless_normal([3, 5, 16], seed=[5, 6])
        ours(x), theirs(x)
        ours.set_weights([tf.random.stateless_normal(w.shape, seed=[7, i]) for i, w in enumerate(ours.weights)])
        theirs.set_weights(ours.get_weights())
        results, dtypes = [], []
        for layer in (ours, theirs):

            @tf.function
            def step(layer=layer):
                with tf.GradientTape() as tape:
                    tape.watch(x)
                    y = layer(x)
                    loss = tf.reduce_sum(tf.cast(y, tf.float32) * upstream)
                return [y, *tape.gradient(loss, [x, *layer.trainable_variables])]

            computed = step()
            dtypes.append(computed[0].dtype)
            results.append([tf.cast(t, tf.float32).numpy() for t in computed])
    finally:
        tf_keras.mixed_precision.set_global_policy(previous)
    assert dtypes[0] == dtypes[1] and len(results[0]) == (4 if center else 3)
    tolerance = 1e-5 if policy == "float32" else 2e-2
    for a, b in zip(*results, strict=True):
        np.testing.assert_allclose(a, b, rtol=tolerance, atol=tolerance)
