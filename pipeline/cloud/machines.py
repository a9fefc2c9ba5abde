"""The machines a cloud profile may name: accelerators with their Vertex machine types and counts, the GPU
machine families, and the image each accelerator kind needs."""

from __future__ import annotations

import dataclasses
import re

from pipeline.config.cloud import CloudConfig
from pipeline.config.pipeline_config import ConfigError


@dataclasses.dataclass(frozen=True)
class Accelerator:
    """One Vertex AI training machine: machine type, accelerator type and count (none for TPU VMs)."""

    kind: str  # cpu | gpu | tpu
    machine_type: str
    accelerator_type: str = ""
    accelerator_count: int = 0
    tpu_topology: str = ""

    @property
    def replicas(self) -> int:
        """Devices training replicates over on one machine: its GPUs, its TPU chips (ct5lp-hightpu-<n>t), else 1."""
        if self.kind == "tpu":
            return int(re.fullmatch(r"ct5lp-hightpu-(\d+)t", self.machine_type).group(1))
        return self.accelerator_count if self.kind == "gpu" else 1


# Names users pick from. TPU VM machine types (ct5lp) carry their chips, so no accelerator_type. Vertex AI
# custom training offers TPU v2, v3 and v5e VMs, v5e for TensorFlow 2.15+
# (cloud.google.com/vertex-ai/docs/training/training-with-tpu-vm).
ACCELERATORS = {
    "cpu": Accelerator("cpu", "n1-standard-8"),
    "t4": Accelerator("gpu", "n1-standard-8", "NVIDIA_TESLA_T4", 1),
    "v100": Accelerator("gpu", "n1-standard-8", "NVIDIA_TESLA_V100", 1),
    "l4": Accelerator("gpu", "g2-standard-8", "NVIDIA_L4", 1),
    "a100": Accelerator("gpu", "a2-highgpu-1g", "NVIDIA_TESLA_A100", 1),
    "a100-80gb": Accelerator("gpu", "a2-ultragpu-1g", "NVIDIA_A100_80GB", 1),
    "h100": Accelerator("gpu", "a3-highgpu-8g", "NVIDIA_H100_80GB", 8),
    "tpu-v5e-1": Accelerator("tpu", "ct5lp-hightpu-1t", tpu_topology="1x1"),
    "tpu-v5e-4": Accelerator("tpu", "ct5lp-hightpu-4t", tpu_topology="2x2"),
    "tpu-v5e-8": Accelerator("tpu", "ct5lp-hightpu-8t", tpu_topology="2x4"),
}


# Asked for by users, refused with the reason instead of emitting a job that cannot run.
REFUSED_ACCELERATORS = {
    **{
        f"tpu-v6e-{chips}": "Vertex AI trains on TPU v6e with JAX and PyTorch only, not TensorFlow "
        "(cloud.google.com/vertex-ai/docs/training/training-with-tpu-vm)"
        for chips in (1, 4, 8)
    },
    "tpu-v5p-8": "TPU v5p is not among the TPU VMs Vertex AI custom training offers (v2, v3, v5e)",
    # The tpu image runs TensorFlow on PJRT with libtpu from PyPI (tensorflow-tpu 2.20 and the libtpu it
    # declares): the route Cloud TPU documents for TensorFlow on v5e. v2/v3 VMs are not on it.
    **{
        f"tpu-{version}-8": f"TPU {version} trains TensorFlow through an older TPU runtime than the PJRT/libtpu "
        "route the Dockerfile's tpu target takes (documented for v5e); use tpu-v5e-1|4|8"
        for version in ("v2", "v3")
    },
}


# GPUs per machine: A2, A3 and G2 machine types come with a fixed number; N1 machines take T4s or V100s in
# the counts Compute Engine allows, on a machine big enough for them.
GPU_MACHINES = {
    "t4": {1: "n1-standard-8", 2: "n1-standard-16", 4: "n1-standard-32"},
    "v100": {1: "n1-standard-8", 2: "n1-standard-16", 4: "n1-standard-32", 8: "n1-standard-64"},
    "l4": {1: "g2-standard-8", 2: "g2-standard-24", 4: "g2-standard-48", 8: "g2-standard-96"},
    "a100": {1: "a2-highgpu-1g", 2: "a2-highgpu-2g", 4: "a2-highgpu-4g", 8: "a2-highgpu-8g", 16: "a2-megagpu-16g"},
    "a100-80gb": {1: "a2-ultragpu-1g", 2: "a2-ultragpu-2g", 4: "a2-ultragpu-4g", 8: "a2-ultragpu-8g"},
    "h100": {8: "a3-highgpu-8g"},
}


# The machine family each GPU is attached to (Compute Engine's GPU platforms).
GPU_FAMILIES = {
    "t4": "n1-", "v100": "n1-", "l4": "g2-", "a100": "a2-highgpu-", "a100-80gb": "a2-ultragpu-", "h100": "a3-"
}  # fmt: skip


_G2_GPUS = {4: 1, 8: 1, 12: 1, 16: 1, 32: 1, 24: 2, 48: 4, 96: 8}


def fixed_gpu_count(machine_type: str) -> int | None:
    """The GPUs an A2, A3 or G2 machine type comes with; None for machine types that take a chosen count."""
    if match := re.fullmatch(r"a[23]-(?:high|ultra|mega|edge)gpu-(\d+)g", machine_type):
        return int(match.group(1))
    if match := re.fullmatch(r"g2-standard-(\d+)", machine_type):
        return _G2_GPUS.get(int(match.group(1)))
    return None


def accelerator(cloud: CloudConfig) -> Accelerator:
    """The Trainer's machine: the named placement, sized by trainer_accelerator_count and trainer_machine_type,
    refused with the reason when Vertex AI could not run it."""
    name = cloud.trainer_accelerator
    if name in REFUSED_ACCELERATORS:
        raise ConfigError(
            f"cloud.trainer_accelerator '{name}': {REFUSED_ACCELERATORS[name]}. Pick one of {sorted(ACCELERATORS)}"
        )
    if name not in ACCELERATORS:
        raise ConfigError(f"cloud.trainer_accelerator '{name}' is unknown; pick one of {sorted(ACCELERATORS)}")
    chosen = ACCELERATORS[name]
    count = cloud.trainer_accelerator_count
    if count and chosen.kind != "gpu":
        raise ConfigError(f"cloud.trainer_accelerator_count is for GPUs; '{name}' is sized by its name. Set it to 0.")
    if chosen.kind == "gpu" and count and not cloud.trainer_machine_type:
        machines = GPU_MACHINES[name]
        if count not in machines:
            raise ConfigError(
                f"cloud.trainer_accelerator_count {count}: Vertex AI machines take {name} GPUs in counts "
                f"{sorted(machines)}"
            )
        chosen = dataclasses.replace(chosen, machine_type=machines[count], accelerator_count=count)
    if cloud.trainer_machine_type:
        chosen = dataclasses.replace(chosen, machine_type=cloud.trainer_machine_type)
        if count:
            chosen = dataclasses.replace(chosen, accelerator_count=count)
        fixed = fixed_gpu_count(chosen.machine_type) if chosen.kind == "gpu" else None
        if fixed is not None and fixed != chosen.accelerator_count:
            raise ConfigError(
                f"cloud.trainer_machine_type {chosen.machine_type} comes with {fixed} GPU(s), not "
                f"{chosen.accelerator_count}: set cloud.trainer_accelerator_count to {fixed}, or leave "
                "trainer_machine_type empty and the count picks the machine"
            )
    return chosen


# Why the pipeline image (Dockerfile target cpu) cannot train on an accelerator, and which image can.
ACCELERATOR_IMAGE_TARGETS = {
    "gpu": "GPU kernels but no CUDA libraries (it would train on the CPU): build the Dockerfile's gpu target",
    "tpu": "no TPU support: build the Dockerfile's tpu target (TensorFlow 2.20 for TPU and libtpu, "
    "tpu-requirements.txt)",
}


# The placement nearest a multi-host TPU slice that trains TensorFlow here.
LARGEST_TPU = "tpu-v5e-8"
