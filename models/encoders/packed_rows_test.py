"""Packed rows give every family's classifier the numbers it gives the texts one per row: logits and gradients,
positions counted per text (learned, RoBERTa's from the padding id, rotary, relative), local windows, each head's
pooling (first token, mean, late)."""

import numpy as np
import pytest
import tensorflow as tf

from models.encoders import classifier
from models.training.row_packing import pack

_TINY = {"vocab_size": 60, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 2}
_ROTARY = {**_TINY, "max_position_embeddings": 64}
FAMILIES = {
    "bert": {"model_type": "bert", "max_position_embeddings": 40, **_TINY},
    "roberta": {"model_type": "roberta", "max_position_embeddings": 42, "pad_token_id": 1, **_TINY},
    "electra": {"model_type": "electra", "max_position_embeddings": 40, "embedding_size": 8, **_TINY},
    "albert": {"model_type": "albert", "max_position_embeddings": 40, "embedding_size": 8, **_TINY},
    "mpnet": {"model_type": "mpnet", "max_position_embeddings": 42, "pad_token_id": 1, **_TINY},
    "distilbert": {"model_type": "distilbert", "vocab_size": 60, "dim": 16, "hidden_dim": 24, "n_layers": 2,
                   "n_heads": 2, "max_position_embeddings": 40},
    "deberta-v3": {"model_type": "deberta-v2", "max_position_embeddings": 40, "relative_attention": True,
                   "position_buckets": 8, "pos_att_type": ["p2c", "c2p"], "position_biased_input": False,
                   "norm_rel_ebd": "layer_norm", "type_vocab_size": 0, **_TINY},
    "modernbert": {"model_type": "modernbert", "local_attention": 4, "num_hidden_layers": 3,
                   **{k: v for k, v in _ROTARY.items() if k != "num_hidden_layers"}},
    "modernbert-cls": {"model_type": "modernbert", "local_attention": 4, "classifier_pooling": "cls", **_ROTARY},
    "gte": {"model_type": "gte", "type_vocab_size": 2, **_ROTARY},
    "eurobert": {"model_type": "eurobert", "num_key_value_heads": 1, **_ROTARY},
    "eurobert-mean": {"model_type": "eurobert", "classifier_pooling": "mean", **_ROTARY},
}  # fmt: skip
LENGTHS = [5, 9, 3, 12, 7, 2, 16, 4]
WIDTH = 16


def _batch(lengths=LENGTHS, width=WIDTH, seed=0):
    rng = np.random.default_rng(seed)
    mask = (np.arange(width)[None, :] < np.array(lengths)[:, None]).astype(np.int64)
    ids = np.where(mask > 0, rng.integers(5, 60, (len(lengths), width)), 0).astype(np.int64)
    types = np.where(np.arange(width)[None, :] >= np.array(lengths)[:, None] // 2, 1, 0) * mask
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types.astype(np.int64)}


def _model(config):
    model = classifier.build(config, ["a", "b", "c"])
    rng = np.random.default_rng(1)
    for param in model.torch_params():  # weights far from the initial ones: every term of the function counts
        param.variable.assign(rng.normal(size=param.variable.shape).astype(np.float32) * 0.3)
    return model


def test_a_batch_packs_into_fewer_rows_with_every_token_in_its_place():
    features = _batch()
    packed, _ = pack({k: tf.constant(v) for k, v in features.items()}, tf.zeros([8]), WIDTH)
    packed = {k: v.numpy() for k, v in packed.items()}
    assert packed["input_ids"].shape == (4, WIDTH)  # first-fit decreasing: 16 | 12 4 | 9 7 | 5 3 2, not 8 rows
    assert packed["attention_mask"].sum() == sum(LENGTHS)
    for text, length in enumerate(LENGTHS):
        row, start = packed["text_rows"][text], packed["text_starts"][text]
        where = slice(start, start + length)
        np.testing.assert_array_equal(packed["input_ids"][row, where], features["input_ids"][text, :length])
        np.testing.assert_array_equal(packed["position_ids"][row, where], np.arange(length))
        assert (packed["segment_ids"][row, where] == text + 1).all()
        assert packed["text_lengths"][text] == length


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_packed_rows_give_each_text_the_logits_it_has_alone(family):
    model = _model(FAMILIES[family])
    features = _batch()
    alone = model({k: tf.constant(v) for k, v in features.items()}, training=False).numpy()
    packed, _ = pack({k: tf.constant(v) for k, v in features.items()}, tf.zeros([8]), WIDTH)
    together = model(packed, training=False).numpy()
    assert together.shape == alone.shape == (len(LENGTHS), 3)
    np.testing.assert_allclose(together, alone, rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("family", ["bert", "roberta", "modernbert", "deberta-v3"])
def test_packed_rows_give_the_same_loss_and_gradients(family):
    model = _model({**FAMILIES[family], "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0})
    features = {k: tf.constant(v) for k, v in _batch(seed=2).items()}
    labels = tf.constant([0, 1, 2, 0, 1, 2, 0, 1])
    loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def loss_and_gradients(inputs):
        with tf.GradientTape() as tape:
            value = loss(labels, model(inputs, training=True))
        return value, tape.gradient(value, model.trainable_variables)

    alone, alone_grads = loss_and_gradients(features)
    together, together_grads = loss_and_gradients(pack(features, labels, WIDTH)[0])
    np.testing.assert_allclose(together.numpy(), alone.numpy(), rtol=1e-5)
    for a, b, variable in zip(alone_grads, together_grads, model.trainable_variables, strict=True):
        np.testing.assert_allclose(tf.convert_to_tensor(b).numpy(), tf.convert_to_tensor(a).numpy(), rtol=2e-3,
                                   atol=2e-5, err_msg=variable.name)  # fmt: skip
