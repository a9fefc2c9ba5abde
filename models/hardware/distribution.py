"""Where training runs: the tf.distribute strategy and the numeric precision for the hardware found."""

from __future__ import annotations

import dataclasses
import glob
import json
import os
from collections.abc import Callable

import tensorflow as tf

from models.errors import UserError

TPU_ENV_HINTS = ("TPU_NAME", "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS", "TPU_WORKER_ID")


@dataclasses.dataclass(frozen=True)
class Placement:
    strategy: tf.distribute.Strategy
    kind: str  # tpu | multi-worker | multi-gpu | multi-cpu | gpu | cpu
    replicas: int
    role: ClusterRole | None = None  # this process's task in a multi-worker cluster

    @property
    def is_chief(self) -> bool:
        """The one process that writes: checkpoints' home, the export, the training record, TensorBoard."""
        return self.role is None or self.role.is_chief

    def describe(self) -> str:
        where = f", {self.role.describe()}" if self.role else ""
        return f"{self.kind} ({type(self.strategy).__name__}, {self.replicas} replica(s){where})"


# Task types that train under MultiWorkerMirroredStrategy; Vertex AI names its first pool "chief" and its second
# "worker" in TF_CONFIG (its third, "ps" or a Reduction Server, and fourth, "evaluator", do not train here).
TRAINING_TASKS = ("chief", "worker")


@dataclasses.dataclass(frozen=True)
class ClusterRole:
    """This process's task in a training cluster, as TF_CONFIG states it (Vertex AI sets it on each replica)."""

    task_type: str
    task_index: int
    training_tasks: int  # chief + workers: the processes that train in lock-step
    has_chief: bool

    @property
    def is_chief(self) -> bool:
        # TensorFlow's rule (multi_worker_util.is_chief): the "chief" task, else worker 0.
        return self.task_type == "chief" or (not self.has_chief and self.task_type == "worker" and self.task_index == 0)

    def describe(self) -> str:
        return f"{self.task_type} {self.task_index} of {self.training_tasks} workers"


def cluster_role(environ=os.environ) -> ClusterRole | None:
    """The training cluster TF_CONFIG describes, or None when this process trains alone (no TF_CONFIG, or a
    cluster of one task). Read as JSON, before TensorFlow starts: the strategy it selects must be created first."""
    config = json.loads(environ.get("TF_CONFIG") or "{}")
    cluster, task = config.get("cluster") or {}, config.get("task") or {}
    tasks = sum(len(cluster.get(kind, [])) for kind in TRAINING_TASKS)
    if tasks <= 1:
        return None
    if task.get("type") not in TRAINING_TASKS:
        raise DeviceSetupError(
            f"TF_CONFIG names this task '{task.get('type')}', which does not train under MultiWorkerMirroredStrategy "
            f"(tasks that do: {', '.join(TRAINING_TASKS)}); run the Trainer only in the chief and worker pools"
        )
    return ClusterRole(task["type"], int(task.get("index", 0)), tasks, bool(cluster.get("chief")))


def multi_worker_strategy(gpus: bool) -> tf.distribute.Strategy:
    """MultiWorkerMirroredStrategy over the TF_CONFIG cluster: NCCL all-reduce between GPUs, the ring over gRPC
    between CPUs. Must be created before TensorFlow runs its first op (collective ops are set up at start)."""
    implementation = tf.distribute.experimental.CommunicationImplementation
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=implementation.NCCL if gpus else implementation.RING
    )
    return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)


def tpu_address() -> str | None:
    """'local' on a TPU VM (Vertex TPU workers), the TPU name where one is configured, else None.

    Decided from the machine, not by asking a metadata server, so CPU hosts never wait on the network.
    """
    if glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*"):
        return "local"
    for name in TPU_ENV_HINTS:
        if os.environ.get(name):
            return os.environ.get("TPU_NAME", "local")
    return None


def connect_tpu(address: str) -> tf.distribute.Strategy:
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=address)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


class DeviceSetupError(UserError, RuntimeError):
    """Logical devices were asked for after TensorFlow had already set its devices up."""


def configure_cpu_replicas(replicas: int) -> None:
    """Splits the first CPU into `replicas` logical devices. Must run before TensorFlow initializes its
    devices, which is why the local runner calls it before any component starts."""
    if replicas <= 1:
        return
    (cpu, *_) = tf.config.list_physical_devices("CPU")
    current = tf.config.get_logical_device_configuration(cpu)
    if current and len(current) == replicas:
        return
    try:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * replicas)
    except RuntimeError as error:
        raise DeviceSetupError(
            f"cannot split the CPU into {replicas} logical devices: TensorFlow has already initialized its "
            "devices in this process. Set training.cpu_replicas before the run starts (hftfx run does)."
        ) from error


def select_placement(
    find_tpu: Callable[[], str | None] = tpu_address,
    make_tpu_strategy: Callable[[str], tf.distribute.Strategy] = connect_tpu,
    list_gpus: Callable[[], list] = lambda: tf.config.list_logical_devices("GPU"),
    make_mirrored_strategy: Callable[[list[str]], tf.distribute.Strategy] = tf.distribute.MirroredStrategy,
    cpu_replicas: int = 1,
    list_cpus: Callable[[], list] = lambda: tf.config.list_logical_devices("CPU"),
    role: ClusterRole | None = None,
    make_multi_worker_strategy: Callable[[bool], tf.distribute.Strategy] = multi_worker_strategy,
) -> Placement:
    """MultiWorkerMirroredStrategy when `role` places this process in a cluster of workers (TF_CONFIG), TPUStrategy
    when a TPU is there, MirroredStrategy over several GPUs (or over `cpu_replicas` logical CPUs when asked), else
    the default strategy."""
    if role is not None:
        # Physical devices: listing logical ones would start TensorFlow before the collectives are set up.
        strategy = make_multi_worker_strategy(gpu_present())
        return Placement(strategy, "multi-worker", strategy.num_replicas_in_sync, role)
    address = find_tpu()
    if address is not None:
        strategy = make_tpu_strategy(address)
        return Placement(strategy, "tpu", strategy.num_replicas_in_sync)
    gpus = list_gpus()
    if len(gpus) > 1:
        strategy = make_mirrored_strategy([g.name for g in gpus])
        return Placement(strategy, "multi-gpu", strategy.num_replicas_in_sync)
    if not gpus and cpu_replicas > 1:
        cpus = list_cpus()
        if len(cpus) < cpu_replicas:
            raise DeviceSetupError(
                f"training.cpu_replicas is {cpu_replicas} but TensorFlow sees {len(cpus)} logical CPU device(s); "
                "configure_cpu_replicas must run before TensorFlow initializes its devices"
            )
        strategy = make_mirrored_strategy([c.name for c in cpus[:cpu_replicas]])
        return Placement(strategy, "multi-cpu", strategy.num_replicas_in_sync)
    strategy = tf.distribute.get_strategy()
    return Placement(strategy, "gpu" if gpus else "cpu", 1)


def gpu_present() -> bool:
    return bool(tf.config.list_physical_devices("GPU"))


def gpu_supports_bf16() -> bool:
    gpus = tf.config.list_physical_devices("GPU")
    capabilities = [tf.config.experimental.get_device_details(g).get("compute_capability", (0, 0)) for g in gpus]
    return bool(gpus) and all(c >= (8, 0) for c in capabilities)


# Keras' mixed-precision policy per precision; under mixed_float16 Model.compile wraps the optimizer in a
# LossScaleOptimizer (dynamic loss scaling), which fp16's narrow exponent needs and bf16 does not.
KERAS_POLICY = {"bf16": "mixed_bfloat16", "fp16": "mixed_float16", "fp32": "float32"}
MATMUL_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}  # the peak a run is measured against
TPU_STEPS_PER_EXECUTION = 32  # steps per host round trip on TPUs: Keras' TPU guides use 32-100


def resolve_precision(
    requested: str,
    placement: Placement,
    gpu_bf16: Callable[[], bool] = gpu_supports_bf16,
) -> str:
    """'bf16', 'fp16' or 'fp32': TPUs always bf16; 'auto' takes bf16 on GPUs that compute it natively (Ampere
    and later), fp16 with loss scaling on older ones (T4, V100: their tensor cores compute fp16, not bf16, so
    fp32 would leave them idle), fp32 on CPUs.

    On CPUs bf16 is opt-in (`precision: bf16`), as in Keras and the HF Trainer: only some CPUs (AMX,
    AVX512-BF16) compute it natively, so an automatic choice would make the default run's metrics depend on
    the CPU kind; and on the default model the loop ran only 1.2x faster in bf16 on an AMX CPU.
    """
    if placement.kind == "tpu" or requested == "bf16":
        return "bf16"
    if requested in ("fp16", "fp32"):
        return requested
    if placement.kind not in ("gpu", "multi-gpu") and not (placement.kind == "multi-worker" and gpu_present()):
        return "fp32"
    return "bf16" if gpu_bf16() else "fp16"


def precision_reason(requested: str, chosen: str, placement: Placement, native_cpu_bf16: bool) -> str:
    """Why `chosen` for the Trainer's line: the user asked, or what auto read from the hardware."""
    if placement.kind == "tpu":
        return "TPUs compute bf16"
    if requested != "auto":
        return "asked for"
    if chosen != "fp32":
        return "auto: this GPU computes bf16" if chosen == "bf16" else "auto: this GPU's tensor cores compute fp16"
    if native_cpu_bf16:
        return (
            "auto: fp32 on CPUs, also this one with native bf16, until `make bench-seeds` at bf16 shows its accuracy "
            "within fp32's seed spread; --precision bf16 to take it"
        )
    return "auto: this CPU has no native bf16 (AVX512-BF16, AMX)"


def resolve_steps_per_execution(requested: int | str, placement: Placement) -> int:
    """Training steps run per call from the host: TPU_STEPS_PER_EXECUTION on TPUs, where each call is a round
    trip to the TPU host that would otherwise idle the chips between steps; 1 on CPUs and GPUs, where a step's
    launch costs little beside its work and callbacks then see every step. A number in the config wins."""
    if requested != "auto":
        return int(requested)
    return TPU_STEPS_PER_EXECUTION if placement.kind == "tpu" else 1
