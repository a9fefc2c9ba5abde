"""Loading rules of our encoders without the reference: what a checkpoint may lack, how old and bare checkpoints
are named, which configs are refused, and dtypes numpy lacks."""

import numpy as np
import pytest

from models.encoders import classifier
from models.encoders.layers import UnsupportedConfigError

BERT = {
    "model_type": "bert", "vocab_size": 50, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2,
    "num_attention_heads": 2, "max_position_embeddings": 20, "type_vocab_size": 2,
}  # fmt: skip
MODERNBERT = {
    "model_type": "modernbert", "vocab_size": 50, "hidden_size": 16, "intermediate_size": 24,
    "num_hidden_layers": 3, "num_attention_heads": 2, "local_attention": 4, "max_position_embeddings": 64,
}  # fmt: skip
IDS = {"input_ids": np.array([[2, 7, 9, 11, 3, 0]]), "attention_mask": np.array([[1, 1, 1, 1, 1, 0]])}


def _trained_state(config):
    rng = np.random.default_rng(0)
    model = classifier.build(config, ["a", "b"])
    for param in model.torch_params():
        param.variable.assign(rng.normal(size=param.variable.shape).astype(np.float32) * 0.3)
    return model, classifier.torch_state(model)


@pytest.mark.parametrize("config", [BERT, MODERNBERT], ids=["bert", "modernbert"])
def test_a_bare_encoder_checkpoint_with_old_names_loads_as_the_task_model(config):
    """BertModel / ModernBertModel name tensors without the task prefix; old BERTs call LayerNorm's gamma/beta."""
    source, state = _trained_state(config)
    prefix = "bert." if config is BERT else "model."
    bare = {}
    for name, value in state.items():
        if name.startswith(prefix):
            name = name.removeprefix(prefix)
            if "LayerNorm" in name:
                name = name.replace(".weight", ".gamma").replace(".bias", ".beta")
            bare[name] = value
    target = classifier.build(config, ["a", "b"])
    result = classifier.load(target, bare)
    # what the bare checkpoint cannot hold is new: the classifier (BERT's pooler is the encoder's, and loads)
    assert set(result.new) == {name for name in source.head_names() if not name.startswith(prefix)}
    assert result.unused == ()
    for param in target.encoder.torch_params():
        np.testing.assert_array_equal(classifier.torch_state(target)[param.name], state[param.name])


def test_a_missing_encoder_tensor_is_named_and_a_head_for_other_labels_is_new():
    _, state = _trained_state(BERT)
    target = classifier.build(BERT, ["a", "b", "c"])
    result = classifier.load(target, state)
    assert result.new == ("classifier.weight", "classifier.bias")  # 2 labels there, 3 here: a new classifier
    state.pop("bert.encoder.layer.1.output.dense.weight")
    with pytest.raises(
        classifier.CheckpointError, match=r"missing \['bert\.encoder\.layer\.1\.output\.dense\.weight'\]"
    ):
        classifier.load(classifier.build(BERT, ["a", "b"]), state)


def test_a_fine_tuned_checkpoint_scores_as_it_did():
    source, state = _trained_state(MODERNBERT)
    target = classifier.build(MODERNBERT, ["a", "b"])
    assert classifier.load(target, state).new == ()
    np.testing.assert_array_equal(target(IDS).numpy(), source(IDS).numpy())


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({**BERT, "position_embedding_type": "relative_key"}, "position_embedding_type 'relative_key'"),
        ({**MODERNBERT, "rope_scaling": {"rope_type": "linear", "factor": 2.0}}, "rope_type 'linear'"),
        ({**MODERNBERT, "classifier_pooling": "max"}, "classifier_pooling 'max'"),
        ({**BERT, "hidden_act": "mish"}, "activation 'mish'"),
        ({**BERT, "model_type": "deberta-v2", "pooler_hidden_act": "mish"}, "activation 'mish'"),
    ],
)
def test_what_our_encoders_do_not_compute_is_refused(change, message):
    """Before any component (the preflight's check) and at build alike."""
    with pytest.raises(UnsupportedConfigError, match=message):
        classifier.check_config(change)
    with pytest.raises(UnsupportedConfigError, match=message):
        classifier.build(change, ["a", "b"])


def test_bfloat16_checkpoints_read_as_float32(tmp_path):
    import tensorflow as tf
    from safetensors.tensorflow import save_file

    save_file({"w": tf.constant([[1.5, -2.25]], tf.bfloat16)}, str(tmp_path / "model.safetensors"))
    read = classifier.read_safetensors(tmp_path / "model.safetensors")
    assert read["w"].dtype == np.float32 and read["w"].tolist() == [[1.5, -2.25]]


_ROTARY = {k: v for k, v in MODERNBERT.items() if k not in ("model_type", "local_attention")}
SCALED_DOT_FAMILIES = {  # each family that attends through attention.scaled_dot_attention
    "bert": BERT,
    "modernbert": MODERNBERT,
    "gte": {**_ROTARY, "model_type": "gte", "type_vocab_size": 2},
    "eurobert": {**_ROTARY, "model_type": "eurobert", "num_key_value_heads": 1},
}


@pytest.mark.parametrize("config", SCALED_DOT_FAMILIES.values(), ids=SCALED_DOT_FAMILIES)
def test_the_trainers_bound_on_widths_reaches_every_layers_attention(config):
    """A training step at a run-time width (the Trainer's batches cut to their bucket) switches between ways of
    attending in every layer; bound_width(max_seq_length) leaves none where only one can happen."""
    import tensorflow as tf

    def switches(model) -> int:
        spec = {name: tf.TensorSpec([4, None], tf.int64) for name in IDS}
        step = tf.function(lambda inputs: model(inputs, training=True), input_signature=[spec])
        graph = step.get_concrete_function().graph
        return sum(op.type in ("Case", "StatelessCase") for op in graph.get_operations())

    model = classifier.build(config, ["a", "b"])
    assert switches(model) == model.config.num_hidden_layers
    model.bound_width(16)
    assert switches(model) == 0
