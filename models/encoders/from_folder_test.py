"""A model folder's classifier: the packaged MiniLM loads with its real weights, only the head starts fresh, a
checkpoint that does not fit is named, the dropout setting and the position limit are the model's."""

import shutil

import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import load_file

from models.encoders.from_folder import build_classifier, read_model_folder


@pytest.fixture(scope="module")
def loaded(packaged_model_dir):
    files = read_model_folder(packaged_model_dir)
    model, report = build_classifier(files, ["rotten", "fresh"])
    return files, model, report


def test_encoder_weights_equal_the_checkpoint(loaded):
    files, model, _ = loaded
    checkpoint = load_file(str(files.weights))
    words = model.get_input_embeddings().words.embeddings.numpy()
    np.testing.assert_array_equal(words, checkpoint["embeddings.word_embeddings.weight"])
    # PyTorch Linear weights are [out, in]; the TF Dense kernel is their transpose.
    query = model.encoder.blocks[3].query.kernel.numpy()
    np.testing.assert_array_equal(query, checkpoint["encoder.layer.3.attention.self.query.weight"].T)


def test_only_the_head_is_new(loaded):
    """The bare BertModel checkpoint brings the encoder and BERT's pooler (part of its head); the classifier is
    new, and the position-id buffer is the one tensor no weight reads."""
    _, _, report = loaded
    assert report.missing == ("classifier.weight", "classifier.bias")
    assert report.unexpected == ("bert.embeddings.position_ids",)
    assert report.loaded == 103


def test_forward_pass_gives_logits_per_label(loaded, packaged_model_dir):
    from transformers import AutoTokenizer

    _, model, _ = loaded
    batch = AutoTokenizer.from_pretrained(packaged_model_dir)(
        ["a moving, beautiful film", "a tedious mess"], padding=True, return_tensors="np"
    )
    logits = model(dict(batch), training=False)
    assert logits.shape == (2, 2)
    assert bool(tf.reduce_all(tf.math.is_finite(logits)))


def test_checkpoint_that_does_not_fit_the_encoder_is_an_error(packaged_model_dir, tmp_path):
    import json

    from models.encoders.from_folder import WeightsError

    copy = tmp_path / "model"
    shutil.copytree(packaged_model_dir, copy)
    config = json.loads((copy / "config.json").read_text())
    config["num_hidden_layers"] = 8  # two layers more than the checkpoint has
    (copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(
        WeightsError, match=r"does not match config.json's architecture: missing \['bert\.encoder\.layer\.6"
    ):
        build_classifier(read_model_folder(copy), ["a", "b"])


def test_the_dropout_setting_reaches_every_dropout_layer_and_a_training_pass_sees_it(tiny_bert_dir):
    import tf_keras

    from models.encoders.from_folder import WeightsError, set_dropout

    files = read_model_folder(tiny_bert_dir)
    checkpoints, _ = build_classifier(files, ["a", "b"])
    off, _ = build_classifier(files, ["a", "b"], dropout=0.0)

    def rates(model):
        return [layer.rate for layer in model.submodules if isinstance(layer, tf_keras.layers.Dropout)]

    assert len(rates(checkpoints)) >= 4 and set(rates(checkpoints)) == {0.1}  # embeddings, attention, hidden, head
    assert rates(off) == [0.0] * len(rates(checkpoints))
    ids = tf.constant([[101, 2204, 3185, 102], [101, 6659, 102, 0]])
    inputs = {"input_ids": ids, "attention_mask": tf.cast(ids > 0, tf.int32)}
    tf_keras.utils.set_random_seed(0)
    assert not np.allclose(checkpoints(inputs, training=True), checkpoints(inputs, training=True))
    np.testing.assert_array_equal(off(inputs, training=True), off(inputs, training=True))
    # the same inputs and shapes in both modes, so the same sums on any CPU: equal but for rate-0 dropout's no-op
    np.testing.assert_allclose(off(inputs, training=True), off(inputs, training=False), rtol=1e-6)
    with pytest.raises(WeightsError, match="no Keras dropout layers"):
        set_dropout(tf_keras.Sequential([tf_keras.layers.Dense(2)]), 0.0)


@pytest.mark.parametrize("family", ["roberta", "mpnet", "albert"])
def test_the_position_limit_is_the_longest_input_the_model_runs(family_model_dir, family):
    """The limit is what the encoder really accepts: RoBERTa and MPNet count positions from the padding id up
    (130 embeddings hold 128 tokens), ALBERT from 0."""
    from models.encoders.from_folder import position_limit

    directory = family_model_dir(family)
    limit = position_limit(directory)
    model, _ = build_classifier(read_model_folder(directory), ["a", "b"])

    def run(width):
        return model({"input_ids": tf.fill([1, width], 5), "attention_mask": tf.ones([1, width], tf.int32)})

    run(limit)
    with pytest.raises(tf.errors.InvalidArgumentError):
        run(limit + 1)
