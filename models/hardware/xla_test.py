"""TPU readiness on a CPU host: the real model's training step compiles with XLA (static shapes, no
data-dependent shapes), and the Trainer runs under MirroredStrategy with the global batch it promises."""

import subprocess

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from models.encoders.from_folder import build_classifier, read_model_folder
from tests.tiny_model import tiny_run_command


def test_real_model_training_step_compiles_with_xla(packaged_model_dir):
    tf_keras.utils.set_random_seed(0)  # the new head's initial weights and dropout: not whatever ran before
    # no dropout: the same batch three times then must lose loss (with it, a draw of masks can raise it)
    model, _ = build_classifier(read_model_folder(packaged_model_dir), ["rotten", "fresh"], dropout=0.0)
    model.compile(
        optimizer=tf_keras.optimizers.Adam(1e-5),
        loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    rng = np.random.default_rng(0)
    batch = {
        "input_ids": rng.integers(1000, 30000, size=(8, 64)).astype(np.int64),
        "attention_mask": np.ones((8, 64), np.int64),
        "token_type_ids": np.zeros((8, 64), np.int64),
    }
    labels = np.array([0, 1] * 4, np.int64)
    losses = [float(model.train_on_batch(batch, labels)) for _ in range(3)]
    assert all(np.isfinite(losses))
    assert losses[-1] < losses[0], "the compiled step learns"


@pytest.mark.e2e
@pytest.mark.slow  # a whole run (~80 s); distribution_test checks the strategy cpu_replicas selects in every run
def test_trainer_under_mirrored_strategy_over_two_logical_cpus(tmp_path, tiny_bert_dir):
    done = subprocess.run(
        tiny_run_command(tiny_bert_dir, tmp_path, "--set", "training.cpu_replicas=2", train=128),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "multi-cpu (MirroredStrategy, 2 replica(s))" in done.stdout
    assert "global batch 16" in done.stdout  # 8 per replica x 2 replicas
    final = [line for line in done.stdout.splitlines() if "epoch 1 done" in line]
    assert final and "nan" not in final[0]
    assert "BLESSED" in done.stdout


def test_bf16_training_step_compiles_with_xla_with_the_custom_ops_in_it(monkeypatch):
    """A TPU trains in bf16 under XLA: the step compiles on a CPU as a TPU would compile it, with dropout on and
    every custom-gradient op in it (recomputed attention, attention in pieces, recomputed blocks), its matmuls in
    bf16, and learns."""
    from models.encoders import attention, classifier, long_attention
    from models.hardware.distribution import KERAS_POLICY

    monkeypatch.setattr(attention, "RECOMPUTE_ABOVE_BYTES", 0)  # recompute every layer's attention weights
    monkeypatch.setattr(long_attention, "QUERY_CHUNK", 8)  # 16 tokens: attention in two pieces
    tf_keras.utils.set_random_seed(0)
    tf_keras.mixed_precision.set_global_policy(KERAS_POLICY["bf16"])
    try:
        config = {
            "model_type": "bert", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
            "num_hidden_layers": 2, "num_attention_heads": 2, "max_position_embeddings": 32,
            "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
        }  # fmt: skip
        model = classifier.build(config, ["a", "b"])
        model.compile(
            optimizer=tf_keras.optimizers.AdamW(1e-2),
            loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        step = tf.function(lambda x, y: model.train_step((x, y))["loss"], jit_compile=True)  # the step a TPU runs
        rng = np.random.default_rng(0)
        batch = {"input_ids": tf.constant(rng.integers(1, 64, (8, 16))), "attention_mask": tf.ones((8, 16), tf.int64)}
        labels = tf.constant([0, 1] * 4, tf.int64)
        losses = [float(step(batch, labels)) for _ in range(8)]
        hlo = step.experimental_get_compiler_ir(batch, labels)(stage="hlo")
    finally:
        tf_keras.mixed_precision.set_global_policy("float32")
    assert all(np.isfinite(losses)), losses
    assert np.mean(losses[-3:]) < np.mean(losses[:3]), f"the compiled bf16 step learns: {losses}"
    assert "bf16[" in hlo and " dot(" in hlo, "the compiled step computes its matmuls in bf16"
