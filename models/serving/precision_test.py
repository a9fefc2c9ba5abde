"""The serving precision: chosen from the CPU before TensorFlow loads, and kept only if the model's answers hold."""

import pytest
import tensorflow as tf

from models.serving import precision
from models.serving.precision import PrecisionUnavailable, ServingPrecision, choose_serving_precision


def test_auto_takes_bf16_only_where_the_cpu_computes_it_and_an_asked_precision_is_kept():
    assert choose_serving_precision("auto", native_bf16=True).precision == "bf16"
    fallback = choose_serving_precision("auto", native_bf16=False)
    assert fallback.precision == "fp32" and "amx_bf16 or avx512_bf16" in fallback.reason
    emulated = choose_serving_precision("bf16", native_bf16=False)
    assert emulated.precision == "bf16" and "emulated here, slower than fp32" in emulated.reason
    assert choose_serving_precision("bf16", native_bf16=True).reason == "asked for, native on this CPU"
    assert choose_serving_precision("fp32", native_bf16=True).precision == "fp32"


def test_bf16_turns_onednn_on_before_tensorflow_loads_and_is_refused_when_the_user_turned_it_off():
    environ = {}
    precision.prepare_process(ServingPrecision("fp32", "asked for"), environ)
    assert environ == {}, "fp32 leaves TensorFlow's defaults alone"
    with pytest.raises(PrecisionUnavailable, match="TF_ENABLE_ONEDNN_OPTS=0 turns them off"):
        precision.prepare_process(ServingPrecision("bf16", "asked for"), {"TF_ENABLE_ONEDNN_OPTS": "0"})
    # chosen by auto on a native CPU: fp32 instead, saying why
    auto = choose_serving_precision("auto", native_bf16=True)
    fallback = precision.prepare_process(auto, {"TF_ENABLE_ONEDNN_OPTS": "0"})
    assert fallback.precision == "fp32" and fallback.reason.startswith("auto: bf16 needs TensorFlow's oneDNN ops")
    if precision._onednn_on():  # this CPU's default (AVX-512, AMX): bf16 is taken, the switch set for children
        assert precision.prepare_process(ServingPrecision("bf16", "asked for"), environ).precision == "bf16"
    else:  # this process loaded TensorFlow with oneDNN's ops off (this CPU's default): too late to turn them on
        with pytest.raises(PrecisionUnavailable, match="loaded without"):
            precision.prepare_process(ServingPrecision("bf16", "asked for"), environ)
    assert environ == {"TF_ENABLE_ONEDNN_OPTS": "1"}


def test_bf16_that_moves_the_warm_up_answers_falls_back_to_fp32_and_the_rewrite_is_off_again(monkeypatch):
    monkeypatch.setattr(precision, "_onednn_on", lambda: True)
    answers = iter([[[0.30, 0.70]], [[0.38, 0.62]]])  # fp32's, then the rewritten graph's: 0.08 apart
    chosen = precision.apply_precision(ServingPrecision("bf16", "asked for"), lambda: next(answers))
    assert chosen.precision == "fp32" and "moved the warm-up answers by 0.0800" in chosen.reason
    answers = iter([[[0.47, 0.53]], [[0.515, 0.485]]])  # moved 0.045, but overturned a lead over the limit
    assert precision.apply_precision(ServingPrecision("bf16", "asked for"), lambda: next(answers)).precision == "fp32"
    assert not tf.config.optimizer.get_experimental_options().get(precision.BF16_REWRITE)
    answers = iter([[[0.30, 0.70], [0.49, 0.51]], [[0.305, 0.695], [0.51, 0.49]]])  # a near tie may flip
    try:
        kept = precision.apply_precision(ServingPrecision("bf16", "asked for"), lambda: next(answers))
        assert kept.precision == "bf16" and "within 0.0200 of fp32's" in kept.reason
        assert tf.config.optimizer.get_experimental_options()[precision.BF16_REWRITE]
    finally:
        precision._rewrite_to_bf16(False)
