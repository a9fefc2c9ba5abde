"""Strategy and precision choices, with the hardware injected."""

import types

from models.hardware import distribution
from models.hardware.cpu_features import cpu_supports_bf16


def fake_mirrored(made: dict):
    """A MirroredStrategy stand-in that records the devices it was given."""

    class FakeMirrored:
        def __init__(self, devices):
            made["devices"] = devices
            self.num_replicas_in_sync = len(devices)

    return FakeMirrored


class FakeTPUStrategy:
    num_replicas_in_sync = 8


def test_tpu_found_gives_tpu_strategy_and_bf16():
    placement = distribution.select_placement(
        find_tpu=lambda: "local", make_tpu_strategy=lambda address: FakeTPUStrategy()
    )
    assert (placement.kind, placement.replicas) == ("tpu", 8)
    assert distribution.resolve_precision("fp32", placement) == "bf16"
    assert distribution.resolve_steps_per_execution("auto", placement) == distribution.TPU_STEPS_PER_EXECUTION
    assert distribution.resolve_steps_per_execution(4, placement) == 4
    assert distribution.resolve_steps_per_execution("auto", distribution.Placement(None, "gpu", 1)) == 1


def test_several_gpus_give_mirrored_strategy_over_all_of_them():
    gpus = [types.SimpleNamespace(name=f"/device:GPU:{i}") for i in range(4)]
    made = {}
    placement = distribution.select_placement(
        find_tpu=lambda: None, list_gpus=lambda: gpus, make_mirrored_strategy=fake_mirrored(made)
    )
    assert (placement.kind, placement.replicas) == ("multi-gpu", 4)
    assert made["devices"] == [f"/device:GPU:{i}" for i in range(4)]


def test_cpu_gets_the_default_strategy_and_bf16_only_when_asked(tmp_path):
    placement = distribution.select_placement(find_tpu=lambda: None, list_gpus=lambda: [])
    assert (placement.kind, placement.replicas) == ("cpu", 1)
    assert distribution.resolve_precision("auto", placement) == "fp32"  # whatever this CPU computes natively
    assert distribution.resolve_precision("bf16", placement) == "bf16"
    gpu = distribution.Placement(None, "gpu", 1)
    assert distribution.resolve_precision("auto", gpu, gpu_bf16=lambda: True) == "bf16"
    # a T4 or V100: fp16 with loss scaling, what their tensor cores compute
    assert distribution.resolve_precision("auto", gpu, gpu_bf16=lambda: False) == "fp16"
    assert distribution.resolve_precision("fp16", placement) == "fp16"  # asked for, even on a CPU
    assert distribution.resolve_precision("fp32", gpu, gpu_bf16=lambda: True) == "fp32"
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("flags\t\t: fpu sse avx2 amx_bf16 amx_tile\n")
    assert cpu_supports_bf16(cpuinfo)
    cpuinfo.write_text("flags\t\t: fpu sse avx2\n")
    assert not cpu_supports_bf16(cpuinfo)


def test_no_tpu_hint_means_no_tpu(monkeypatch):
    for name in distribution.TPU_ENV_HINTS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(distribution.glob, "glob", lambda pattern: [])
    assert distribution.tpu_address() is None
    monkeypatch.setenv("TPU_NAME", "my-tpu")
    assert distribution.tpu_address() == "my-tpu"


def test_cpu_replicas_give_mirrored_strategy_over_logical_cpus():
    cpus = [types.SimpleNamespace(name=f"/device:CPU:{i}") for i in range(2)]
    made = {}
    placement = distribution.select_placement(
        find_tpu=lambda: None,
        list_gpus=lambda: [],
        make_mirrored_strategy=fake_mirrored(made),
        cpu_replicas=2,
        list_cpus=lambda: cpus,
    )
    assert (placement.kind, placement.replicas) == ("multi-cpu", 2)
    assert made["devices"] == ["/device:CPU:0", "/device:CPU:1"]


def test_cpu_replicas_without_the_logical_devices_is_a_clear_error():
    import pytest

    with pytest.raises(distribution.DeviceSetupError, match="sees 1 logical CPU"):
        distribution.select_placement(
            find_tpu=lambda: None,
            list_gpus=lambda: [],
            cpu_replicas=2,
            list_cpus=lambda: [types.SimpleNamespace(name="/device:CPU:0")],
        )


def _tf_config(cluster: dict, task_type: str, index: int = 0) -> dict[str, str]:
    import json

    return {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}})}


def test_tf_config_places_this_process_in_its_cluster_and_names_the_one_that_writes():
    vertex = {"chief": ["a:1"], "worker": ["b:1", "c:1"], "evaluator": ["d:1"]}  # Vertex AI's four pools, three train
    chief = distribution.cluster_role(_tf_config(vertex, "chief"))
    worker = distribution.cluster_role(_tf_config(vertex, "worker", 1))
    assert (chief.is_chief, chief.training_tasks, chief.describe()) == (True, 3, "chief 0 of 3 workers")
    assert (worker.is_chief, worker.describe()) == (False, "worker 1 of 3 workers")
    # No chief task: worker 0 writes, as in TensorFlow's own rule.
    assert distribution.cluster_role(_tf_config({"worker": ["a:1", "b:1"]}, "worker", 0)).is_chief
    assert not distribution.cluster_role(_tf_config({"worker": ["a:1", "b:1"]}, "worker", 1)).is_chief
    # Alone: no cluster, or a cluster of one (a one-machine CustomJob sets TF_CONFIG too).
    assert distribution.cluster_role({}) is None
    assert distribution.cluster_role(_tf_config({"chief": ["a:1"]}, "chief")) is None


def test_a_task_that_does_not_train_is_refused_by_name():
    import pytest

    with pytest.raises(distribution.DeviceSetupError, match=r"names this task 'evaluator'.*chief and worker pools"):
        distribution.cluster_role(_tf_config({"chief": ["a:1"], "worker": ["b:1"], "evaluator": ["c:1"]}, "evaluator"))


def test_a_cluster_role_gives_the_multi_worker_strategy_before_any_other_choice():
    role = distribution.cluster_role(_tf_config({"chief": ["a:1"], "worker": ["b:1"]}, "worker", 0))
    made = {}

    class FakeMultiWorker:
        num_replicas_in_sync = 2

        def __init__(self, gpus):
            made["gpus"] = gpus

    placement = distribution.select_placement(
        find_tpu=lambda: "local", role=role, make_multi_worker_strategy=FakeMultiWorker
    )
    assert (placement.kind, placement.replicas, placement.is_chief) == ("multi-worker", 2, False)
    assert made == {"gpus": False}  # no GPU here: the ring over gRPC
    assert distribution.resolve_precision("auto", placement) == "fp32"
    assert "worker 0 of 2 workers" in placement.describe()


def test_the_trainer_says_why_its_precision():
    cpu, gpu, tpu = (distribution.Placement(None, kind, 1) for kind in ("cpu", "gpu", "tpu"))
    assert distribution.precision_reason("auto", "fp32", cpu, native_cpu_bf16=False) == (
        "auto: this CPU has no native bf16 (AVX512-BF16, AMX)"
    )
    assert "until `make bench-seeds` at bf16" in distribution.precision_reason("auto", "fp32", cpu, True)
    assert distribution.precision_reason("bf16", "bf16", cpu, False) == "asked for"
    assert distribution.precision_reason("auto", "fp16", gpu, False) == "auto: this GPU's tensor cores compute fp16"
    assert distribution.precision_reason("fp32", "bf16", tpu, False) == "TPUs compute bf16"
