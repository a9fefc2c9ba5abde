import pytest

from models.task import exported_shape, read_contract, task_contract, write_contract


def test_the_key_changes_with_task_labels_order_and_inputs():
    base = task_contract(["neg", "pos"], ["text"])
    others = [
        task_contract(["pos", "neg"], ["text"]),
        task_contract(["neg", "pos", "mixed"], ["text"]),
        task_contract(["neg", "pos"], ["text", "text_pair"]),
        task_contract(["neg", "pos"], ["text"], multi_label=True),
    ]
    assert base.key == task_contract(("neg", "pos"), ("text",)).key
    assert len({base.key, *(o.key for o in others)}) == 5


@pytest.mark.parametrize(
    ("labels", "inputs", "said"),
    [
        (["pos", "neg"], ["text"], "label order ['neg', 'pos'] -> ['pos', 'neg']"),
        (["a", "b", "c"], ["text"], "label set ['neg', 'pos'] -> ['a', 'b', 'c']"),
        (["neg", "pos"], ["text", "text_pair"], "inputs ['text'] -> ['text', 'text_pair']"),
    ],
)
def test_differences_say_what_changed(labels, inputs, said):
    assert task_contract(labels, inputs).differences(task_contract(["neg", "pos"], ["text"])) == [said]


def test_contract_round_trips_through_the_export_folder(tmp_path):
    contract = task_contract(["fresh ✓", "rotten ✗"], ["text"])
    write_contract(str(tmp_path), contract)
    assert read_contract(str(tmp_path)) == contract
    assert read_contract(str(tmp_path / "elsewhere")) is None


def test_exported_shape_reads_inputs_and_label_count_from_saved_model_pb(tmp_path):
    import tensorflow as tf

    class Module(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def serve(self, text):
            return {"probabilities": tf.zeros([tf.size(text), 3])}

    module = Module()
    tf.saved_model.save(module, str(tmp_path), signatures={"serving_default": module.serve.get_concrete_function()})
    assert exported_shape(str(tmp_path)) == (("text",), 3)
