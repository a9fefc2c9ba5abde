"""What the Trainer's CustomJob should cost, said before the run: time from the model's FLOPs and the placement's
peak, the ring all-reduce several workers add, and the price on demand and on Spot VMs.

`training_cost` is arithmetic over the tables below (no TensorFlow, no network); `job_cost` adds what the
config's model and data give (its parameters from config.json, the global batch), and `hftfx run --check` and
`hftfx doctor --estimate` print it for the profile's placement and worker count.
"""

from __future__ import annotations

import dataclasses

from pipeline.cloud.machines import Accelerator, accelerator
from pipeline.config.cloud import CloudConfig

# USD per hour in us-central1 for a Vertex AI custom training machine with the accelerators it carries, on demand
# and as a Spot VM. Prices change and differ by region: the estimate prints this date and source with them.
PRICES_AS_OF = "2026-11"
PRICE_SOURCE = (
    "cloud.google.com/vertex-ai/pricing (custom training, us-central1); Spot: cloud.google.com/spot-vms/pricing"
)
MACHINE_PRICES: dict[str, tuple[float, float]] = {
    "n1-standard-8": (0.437, 0.088),
    "n1-standard-16": (0.874, 0.176),
    "n1-standard-32": (1.748, 0.352),
    "n1-standard-64": (3.496, 0.704),
    "g2-standard-8": (0.980, 0.340),
    "g2-standard-24": (2.300, 0.800),
    "g2-standard-48": (4.600, 1.600),
    "g2-standard-96": (9.200, 3.200),
    "a2-highgpu-1g": (4.408, 1.290),
    "a2-highgpu-2g": (8.815, 2.580),
    "a2-highgpu-4g": (17.630, 5.160),
    "a2-highgpu-8g": (35.260, 10.320),
    "a2-megagpu-16g": (63.000, 20.640),
    "a2-ultragpu-1g": (5.830, 1.900),
    "a2-ultragpu-2g": (11.660, 3.800),
    "a2-ultragpu-4g": (23.320, 7.600),
    "a2-ultragpu-8g": (46.640, 15.200),
    "a3-highgpu-8g": (101.000, 30.000),
    "ct5lp-hightpu-1t": (1.380, 0.550),
    "ct5lp-hightpu-4t": (5.520, 2.210),
    "ct5lp-hightpu-8t": (11.040, 4.420),
}
# GPUs attached to N1 machines are billed on their own, per GPU.
GPU_PRICES: dict[str, tuple[float, float]] = {"NVIDIA_TESLA_T4": (0.4025, 0.140), "NVIDIA_TESLA_V100": (2.852, 0.740)}

# Dense peak TFLOP/s per accelerator in the precision training picks there (models/hardware/distribution.py:
# fp16 on T4 and V100, bf16 on Ampere and later and on TPUs): the vendors' data sheets. A CPU machine: 64
# GFLOP/s fp32 per vCPU (a 2 GHz core with two AVX-512 FMA units is 128 GFLOP/s and carries two vCPUs).
PEAK_TFLOPS = {
    "NVIDIA_TESLA_T4": 65.0,
    "NVIDIA_TESLA_V100": 125.0,
    "NVIDIA_L4": 121.0,
    "NVIDIA_TESLA_A100": 312.0,
    "NVIDIA_A100_80GB": 312.0,
    "NVIDIA_H100_80GB": 989.0,
    "tpu-v5e-chip": 197.0,
}
CPU_VCPU_TFLOPS = 0.064
# Network bandwidth each machine family gets (Compute Engine's egress caps at these sizes), in Gbit/s: what the
# ring all-reduce between workers runs over.
NETWORK_GBPS = {"n1-": 16.0, "g2-": 32.0, "a2-": 100.0, "a3-": 200.0, "ct5lp-": 100.0}


@dataclasses.dataclass(frozen=True)
class TrainingCost:
    """One fine-tune on the profile's placement: time and price, on demand and on Spot VMs."""

    machine: str  # e.g. "2 x g2-standard-8 (1 NVIDIA_L4 each)"
    workers: int
    training_flops: float
    peak_tflops: float  # all workers together
    utilization: float
    steps: int
    gradient_bytes: float
    compute_seconds: float
    all_reduce_seconds: float
    on_demand_usd: float
    spot_usd: float

    @property
    def seconds(self) -> float:
        return self.compute_seconds + self.all_reduce_seconds

    def describe(self) -> str:
        reduce = ""
        if self.workers > 1:
            reduce = (
                f"; a ring all-reduce of {self.gradient_bytes / 1e6:,.0f} MB per step, {self.steps:,} steps: "
                f"~{duration(self.all_reduce_seconds)} in all"
            )
        return (
            f"on Vertex AI, {self.machine}: training ~{duration(self.seconds)} ({self.training_flops / 1e15:.2f} "
            f"PFLOP at {self.utilization:.0%} of {self.peak_tflops:,.1f} TFLOP/s, the default run's share of "
            f"its peak{reduce}; machine start-up not counted); "
            f"~${self.on_demand_usd:,.2f} on demand, ~${self.spot_usd:,.2f} on Spot VMs (prices of {PRICES_AS_OF}: "
            f"{PRICE_SOURCE})"
        )


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def machine_peak_tflops(chosen: Accelerator) -> float:
    """Dense peak of one machine of the placement (a CPU machine's vCPUs are the last part of its type)."""
    if chosen.kind == "tpu":
        return PEAK_TFLOPS["tpu-v5e-chip"] * chosen.replicas
    if chosen.kind == "gpu":
        return PEAK_TFLOPS[chosen.accelerator_type] * chosen.replicas
    return CPU_VCPU_TFLOPS * int(chosen.machine_type.rsplit("-", 1)[-1])


def machine_price(chosen: Accelerator) -> tuple[float, float]:
    """(on demand, spot) USD per hour of one machine with its accelerators."""
    if chosen.machine_type not in MACHINE_PRICES:
        raise KeyError(f"no price for {chosen.machine_type} in pipeline/cloud/cost.py's table")
    on_demand, spot = MACHINE_PRICES[chosen.machine_type]
    if chosen.accelerator_type in GPU_PRICES:
        gpu_on_demand, gpu_spot = GPU_PRICES[chosen.accelerator_type]
        on_demand += gpu_on_demand * chosen.accelerator_count
        spot += gpu_spot * chosen.accelerator_count
    return on_demand, spot


def ring_all_reduce_seconds(gradient_bytes: float, workers: int, gbps: float) -> float:
    """One ring all-reduce of the gradients between `workers` machines: each sends and receives 2 (W-1)/W of them
    (NCCL's and TensorFlow's ring). An upper bound: the strategy overlaps part of it with the backward pass."""
    if workers <= 1:
        return 0.0
    return 2 * (workers - 1) / workers * gradient_bytes / (gbps * 1e9 / 8)


def training_cost(
    cloud: CloudConfig, training_flops: float, steps: int, gradient_bytes: float, utilization: float
) -> TrainingCost:
    """The Trainer's CustomJob for `training_flops` over `steps` optimizer steps, each all-reducing
    `gradient_bytes`, at `utilization` of the placement's peak (the default run's, measured on a CPU)."""
    chosen = accelerator(cloud)
    workers = cloud.trainer_workers
    peak = machine_peak_tflops(chosen) * workers
    compute = training_flops / (peak * 1e12 * utilization)
    gbps = next((v for prefix, v in NETWORK_GBPS.items() if chosen.machine_type.startswith(prefix)), 16.0)
    all_reduce = steps * ring_all_reduce_seconds(gradient_bytes, workers, gbps)
    on_demand, spot = machine_price(chosen)
    hours = (compute + all_reduce) / 3600
    each = f" ({chosen.accelerator_count} {chosen.accelerator_type} each)" if chosen.kind == "gpu" else ""
    return TrainingCost(
        machine=f"{workers} x {chosen.machine_type}{each}",
        workers=workers,
        training_flops=training_flops,
        peak_tflops=peak,
        utilization=utilization,
        steps=steps,
        gradient_bytes=gradient_bytes,
        compute_seconds=compute,
        all_reduce_seconds=all_reduce,
        on_demand_usd=hours * workers * on_demand,
        spot_usd=hours * workers * spot,
    )


def job_cost(config, training_flops: float, examples: int, epochs: int) -> TrainingCost:
    """The Trainer's CustomJob on the config's placement and workers, for `training_flops` over `epochs` of
    `examples`: the global batch grows with the replicas (training.batch_size per replica)."""
    from models.hub.pretrained import resolve_model_dir
    from pipeline.machine.estimate import Reference, trained_parameters

    global_batch = config.training.batch_size * accelerator(config.cloud).replicas * config.cloud.trainer_workers
    steps = max(1, examples // global_batch) * epochs
    parameters = trained_parameters(resolve_model_dir(config.model.name, config.model.revision))
    return training_cost(config.cloud, training_flops, steps, 4 * parameters, Reference.read().trainer_utilization)


def checked_run_cost(chosen) -> TrainingCost | None:
    """What `hftfx run --check` learnt (pipeline/orchestration/choose.py's Choices) priced on the config's Vertex AI
    placement; None for a local config (no cloud.project), or when the sample cannot say how many texts train."""
    from pipeline.machine.estimate import epoch_flops

    config, examples = chosen.config, chosen.train_examples
    if not config.cloud.project or config.cloud.orchestrator != "vertex" or chosen.encoder is None or not examples:
        return None
    epochs = chosen.epoch_choice.epochs  # the Trainer's most, as --check said them
    flops = epoch_flops(chosen.trained_lengths, examples, chosen.buckets.buckets, chosen.encoder, chosen.packed_padding)
    flops *= epochs
    return job_cost(config, flops, examples, epochs)
