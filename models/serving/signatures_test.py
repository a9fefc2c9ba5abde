"""Length-sorted inference: the same logits as one full-width call, in the request's order, with less padding."""

import numpy as np
import pytest
import tensorflow as tf

from models.serving.signatures import logits_by_length


def _request(lengths, width=64):
    mask = np.array([[1] * n + [0] * (width - n) for n in lengths], np.int32)
    return {"input_ids": mask * (np.arange(width, dtype=np.int32) + 7), "attention_mask": mask}


class _RecordingModel:
    """Logits that depend on every real token (and would change if padding were cut from a real token)."""

    def __init__(self):
        self.widths = []

    def __call__(self, inputs):
        if tf.executing_eagerly():
            self.widths.append(tuple(inputs["input_ids"].shape))
        ids = tf.cast(inputs["input_ids"] * inputs["attention_mask"], tf.float32)
        tokens = tf.reduce_sum(tf.cast(inputs["attention_mask"], tf.float32), axis=1)
        return tf.stack([tf.reduce_sum(ids, axis=1), tf.reduce_max(ids, axis=1), tokens], axis=1)


@pytest.mark.parametrize("as_graph", [False, True])
def test_rows_come_back_in_request_order_and_each_call_is_as_wide_as_its_longest(as_graph):
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 65, size=75).tolist()
    request = _request(lengths)
    model = _RecordingModel()

    def run():
        return logits_by_length(model, request, request["attention_mask"], 3, chunk=8)

    logits = tf.function(run)() if as_graph else run()
    full = model({k: tf.constant(v) for k, v in request.items()})
    np.testing.assert_allclose(logits.numpy(), full.numpy())
    if not as_graph:  # in a graph the calls are traced, not counted
        calls = model.widths[:-1]  # the last one is the full-width reference
        assert [batch for batch, _ in calls] == [8] * 9 + [3]
        sorted_lengths = sorted(lengths)
        assert [width for _, width in calls] == [max(sorted_lengths[i : i + 8]) for i in range(0, 75, 8)]


def test_an_empty_request_gives_empty_logits():
    request = {"input_ids": np.zeros([0, 64], np.int32), "attention_mask": np.zeros([0, 64], np.int32)}
    logits = tf.function(lambda: logits_by_length(_RecordingModel(), request, request["attention_mask"], 3))()
    assert logits.shape == (0, 3)


def test_a_real_encoder_gives_each_text_its_own_answer_whatever_it_is_batched_with():
    """A float32 BERT run shortest first in padded chunks answers each text as it does alone, unpadded, within
    what float32 reordering allows (tests/float_bounds.py); with padding left unmasked it would not."""
    import tf_keras

    from models.encoders import classifier
    from tests.float_bounds import probability_bound
    from tests.tiny_model import tiny_bert_config

    tf_keras.utils.set_random_seed(0)
    # weights wide enough that texts move its answers by about 0.05, as a fine-tuned head's do (at the default
    # 0.02 a random encoder answers 1/3 for everything, padding or not)
    config = tiny_bert_config(initializer_range=0.1)
    model = classifier.build(config, ["a", "b", "c"])
    lengths = np.random.default_rng(0).integers(2, 33, size=20).tolist()
    request = {k: tf.constant(v) for k, v in _request(lengths, width=32).items()}

    def probabilities(call):
        logits = logits_by_length(call, request, request["attention_mask"], 3, chunk=8)
        return tf.nn.softmax(logits).numpy()

    alone = np.concatenate(
        [tf.nn.softmax(model({k: v[i : i + 1, :n] for k, v in request.items()})).numpy()
         for i, n in enumerate(lengths)]
    )  # fmt: skip
    bound = probability_bound(config, 32)
    assert np.abs(probabilities(model) - alone).max() <= bound
    unmasked = probabilities(lambda inputs: model({**inputs, "attention_mask": tf.ones_like(inputs["attention_mask"])}))
    assert np.abs(unmasked - alone).max() > 10 * bound


def test_the_representation_is_each_texts_own_mean_hidden_state_however_it_is_batched():
    """The monitor's signature: run shortest first in padded chunks, a text's pooled representation is the mean of
    its own tokens' last hidden states, as alone and unpadded; the padding's states would move it."""
    import tf_keras

    from models.encoders import classifier
    from tests.tiny_model import tiny_bert_config

    tf_keras.utils.set_random_seed(0)
    config = tiny_bert_config(initializer_range=0.1)
    model = classifier.build(config, ["a", "b"])
    lengths = np.random.default_rng(1).integers(2, 33, size=12).tolist()
    request = {k: tf.constant(v) for k, v in _request(lengths, width=32).items()}
    pooled = logits_by_length(model.pooled, request, request["attention_mask"], config["hidden_size"], chunk=4)
    assert pooled.shape == (12, config["hidden_size"])
    for i, n in enumerate(lengths):
        hidden = model.encoder({k: v[i : i + 1, :n] for k, v in request.items()}, training=False)
        np.testing.assert_allclose(pooled[i], tf.reduce_mean(hidden[0], axis=0), atol=1e-5)
    unmasked = model.pooled({**request, "attention_mask": tf.ones_like(request["attention_mask"])})
    assert np.abs(unmasked - pooled).max() > 1e-2
