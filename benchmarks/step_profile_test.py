import tempfile

import numpy as np
import pytest
import tensorflow as tf

from benchmarks.step_profile import (
    ATTENTION,
    BIAS,
    DROPOUT,
    GELU,
    LAYER_NORM,
    MATMULS,
    OPTIMIZER,
    OTHER,
    WORK_KINDS,
    StepProfile,
    cut_for_target,
    profiled_op_seconds,
    seconds_by_kind,
    work_kind,
)


def test_the_profile_of_real_training_steps_puts_the_transformer_s_work_in_its_kinds():
    """Real op names of a BERT classifier's train step under the Trainer's optimizer (our encoder names the
    scopes): every kind of work the table lists is found, forward and gradient, and little is left over."""
    import tf_keras

    from components.trainer.module import compile_for_training
    from models.encoders import classifier
    from pipeline.config.pipeline_config import TrainingConfig
    from tests.tiny_model import tiny_bert_config

    ids = np.array([[101, 2204, 3185, 102], [101, 6659, 102, 0]] * 4, np.int64)
    batch = ({"input_ids": ids, "attention_mask": (ids > 0).astype(np.int64)}, np.array([1, 0] * 4))
    tf_keras.utils.set_random_seed(0)
    model = classifier.build(tiny_bert_config(), ["neg", "pos"])
    compile_for_training(model, TrainingConfig(), total_steps=10)
    model.train_on_batch(*batch)  # traced outside the profile
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        for _ in range(3):
            model.train_on_batch(*batch)
        tf.profiler.experimental.stop()
        op_seconds = profiled_op_seconds(logdir)

    optimizer = model.optimizer.get_config()["name"]
    by_kind = seconds_by_kind(op_seconds, optimizer)
    assert set(by_kind) == set(WORK_KINDS)
    assert sum(by_kind.values()) == pytest.approx(sum(op_seconds.values()))
    assert all(by_kind[kind] > 0 for kind in WORK_KINDS), by_kind
    names_by_kind = {kind: [n for n in op_seconds if work_kind(n, optimizer) == kind] for kind in WORK_KINDS}
    for kind in (MATMULS, LAYER_NORM, GELU, DROPOUT, ATTENTION, BIAS):  # both passes of the layers' work
        assert any(n.startswith("gradient_tape/") for n in names_by_kind[kind]), kind
        assert any(not n.startswith("gradient_tape/") for n in names_by_kind[kind]), kind
    assert by_kind[OTHER] < 0.5 * sum(by_kind.values())


def test_op_names_go_to_the_first_kind_they_match():
    layer = "sequence_classifier/encoder/layer_0"
    expected = {
        f"gradient_tape/{layer}/up/Tensordot/MatMul:_MklMatMul": MATMULS,
        f"{layer}/attention_core/MatMul_1:_MklBatchMatMulV2": MATMULS,
        "AdamW/AdamW/update/ResourceApplyAdam:ResourceApplyAdam": OPTIMIZER,
        f"{layer}/output_LayerNorm/batchnorm/mul:Mul": LAYER_NORM,
        f"gradient_tape/{layer}/Gelu/mul/Mul:Mul": GELU,
        f"{layer}/attention_core/dropout_2/dropout/random_uniform/RandomUniform:RandomUniform": DROPOUT,
        f"{layer}/attention_core/Softmax:_MklSoftmax": ATTENTION,
        f"{layer}/down/BiasAdd:BiasAdd": BIAS,
        "sparse_categorical_crossentropy/Sum:Sum": OTHER,
    }
    assert {name: work_kind(name, "AdamW") for name in expected} == expected


def test_the_cut_needed_for_a_target_follows_from_the_matmuls_share_and_rate():
    # Matmuls half the step at 90% of the peak: 45% now; 60% needs the other half down to a quarter of the step.
    assert cut_for_target(0.5, 0.9, 0.6) == pytest.approx(0.5)
    assert cut_for_target(0.9, 0.9, 0.6) == 0.0  # already there
    assert cut_for_target(0.5, 0.55, 0.6) is None  # the matmuls alone run below the target


def test_the_rows_give_the_step_s_utilization_as_the_matmuls_share_times_their_rate():
    by_kind = dict.fromkeys(WORK_KINDS, 0.0) | {MATMULS: 5.0, OPTIMIZER: 2.0, GELU: 2.5}
    profile = StepProfile(
        steps=10, seconds=10.0, training_flops=1.8e12, peak_gflops=400.0, by_kind=by_kind, unprofiled_gflops=198.0
    )
    rows = {row["name"]: row for row in profile.rows()}
    step = next(row for name, row in rows.items() if name.startswith("Trainer step"))
    assert (step["value"], step["ratio"]) == ("180.0 GFLOP/s", "45%")  # 50% of the step x 90% of the peak
    assert rows["· the same loop unprofiled (one op at a time too): model FLOP/s vs profiled"]["ratio"] == "1.10x"
    assert rows["· matmuls: share of the step; their FLOP/s vs the peak"]["ratio"] == "90%"
    assert rows[f"· {OPTIMIZER}: share of the step"]["value"] == "20.0%"
    assert rows["· between ops (executor, Python, input): share of the step"]["value"] == "5.0%"
    assert next(r["value"] for n, r in rows.items() if n.startswith("non-matmul time")) == "50%"
