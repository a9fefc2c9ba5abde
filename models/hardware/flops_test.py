"""The FLOP model agrees with TensorFlow's own count of the model's matmuls, and sums the batches it is given."""

import pytest
import tensorflow as tf
from tensorflow.python.profiler import model_analyzer, option_builder

from models.encoders.from_folder import build_classifier, read_model_folder
from models.hardware.flops import BatchShapes, EncoderShape
from models.hardware.machine_peak import matmul_peak
from models.serving.signatures import model_logits


def _tf_matmul_flops(fn, batch: int, width: int) -> float:
    """TF's profiler: floating-point operations of every MatMul/BatchMatMul that `fn(token ids)` runs. Only ops
    its outputs need count: a gradient graph holds both products of every MatMul's gradient, and the runtime
    prunes those nothing reads."""
    spec = {name: tf.TensorSpec([batch, width], tf.int32) for name in ("input_ids", "attention_mask", "token_type_ids")}
    graph = tf.function(fn).get_concrete_function(spec).graph
    options = option_builder.ProfileOptionBuilder(option_builder.ProfileOptionBuilder.float_operation())
    options = options.with_empty_output().with_node_names(show_name_regexes=[".*"]).build()
    profile = model_analyzer.profile(graph, options=options)
    needed, pending = set(), [t.op for t in graph.outputs]
    while pending:
        op = pending.pop()
        if op.name not in needed:
            needed.add(op.name)
            pending.extend([t.op for t in op.inputs] + list(op.control_inputs))
    matmuls = [n for n in _walk(profile) if "MatMul" in n.name.rsplit("/", 1)[-1] or "einsum" in n.name]
    return float(sum(node.float_ops for node in matmuls if node.name in needed))


def _forward(model):
    return lambda inputs: model_logits(model, inputs)


def _gradients(model):
    """The gradients of the loss with respect to the model's trainable variables: what a training step computes
    before the optimizer."""

    def gradients(inputs):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(inputs, training=True))
        return tape.gradient(loss, model.trainable_variables)

    return gradients


def _walk(node):
    for child in node.children:
        yield child
        yield from _walk(child)


@pytest.mark.parametrize(("batch", "width"), [(2, 16), (4, 40)])
def test_forward_flops_match_tensorflows_count_of_the_matmuls(tiny_bert_dir, batch, width):
    model, _ = build_classifier(read_model_folder(tiny_bert_dir), ["a", "b", "c"])
    shape = model.encoder_shape()
    assert (shape.layers, shape.hidden, shape.intermediate, shape.num_labels) == (2, 64, 128, 3)
    counted = _tf_matmul_flops(_forward(model), batch, width)
    ours = shape.forward_flops(batch, batch * width, batch * width * width)
    assert ours == pytest.approx(counted, rel=0.02)


def test_training_flops_follow_tensorflows_count_when_the_embeddings_are_frozen(tiny_bert_dir):
    """Frozen embeddings: TensorFlow no longer computes the first layer's input gradients, and the FLOP model
    drops exactly those (Q, K and V: 3 x 2h^2 per token), so utilization is not inflated by work never done."""
    batch, width = 4, 16
    files = read_model_folder(tiny_bert_dir)
    trained, _ = build_classifier(files, ["a", "b"])
    frozen, _ = build_classifier(files, ["a", "b"], freeze_embeddings=True)
    counted_trained = _tf_matmul_flops(_gradients(trained), batch, width)
    counted_saving = counted_trained - _tf_matmul_flops(_gradients(frozen), batch, width)
    totals = (batch, batch * width, batch * width * width)
    ours_trained = trained.encoder_shape().training_flops(*totals)
    ours_frozen = frozen.encoder_shape(embeddings_trained=False).training_flops(*totals)
    assert counted_saving > 0
    assert ours_trained - ours_frozen == pytest.approx(counted_saving, rel=0.02)


def test_batch_shapes_sum_padding_and_training_is_three_forward_passes():
    shapes = BatchShapes()
    shapes.add(batch=4, width=16, real_tokens=40)
    shapes.add(batch=4, width=32, real_tokens=100)
    assert (shapes.examples, shapes.padded_tokens, shapes.padded_token_pairs) == (8, 192, 4 * 256 + 4 * 1024)
    assert shapes.padding_share == pytest.approx(1 - 140 / 192)
    shape = EncoderShape(layers=6, hidden=384, intermediate=1536, heads=12, num_labels=2)
    assert shapes.training_flops(shape) == 3 * shape.forward_flops(8, 192, 4 * 256 + 4 * 1024)


def test_matmul_peak_is_measured_in_gflops():
    peak = matmul_peak("float32", seconds=0.5)
    assert peak.dtype == "float32" and peak.device == "/CPU:0"
    assert 1 < peak.gflops < 100_000  # a CPU core does several GFLOP/s at least
