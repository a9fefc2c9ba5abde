"""The cost estimate: every placement a profile can pick has a price and a peak; the arithmetic."""

import pytest

from pipeline.cloud import cost
from pipeline.cloud.machines import ACCELERATORS, GPU_MACHINES, accelerator
from pipeline.config.cloud import CloudConfig


def _placements():
    yield from ((name, 0) for name in ACCELERATORS)
    yield from ((name, count) for name, machines in GPU_MACHINES.items() for count in machines)


@pytest.mark.parametrize(("name", "count"), list(_placements()))
def test_every_placement_a_profile_can_pick_has_a_price_and_a_peak(name, count):
    chosen = accelerator(CloudConfig(trainer_accelerator=name, trainer_accelerator_count=count))
    on_demand, spot = cost.machine_price(chosen)
    assert 0 < spot < on_demand
    assert cost.machine_peak_tflops(chosen) > 0


def test_the_ring_all_reduce_moves_twice_the_gradients_less_one_share():
    assert cost.ring_all_reduce_seconds(1e8, 1, 8.0) == 0.0
    assert cost.ring_all_reduce_seconds(1e8, 2, 8.0) == pytest.approx(0.1)  # 2 x 1/2 x 100 MB at 1 GB/s
    assert cost.ring_all_reduce_seconds(1e8, 4, 8.0) == pytest.approx(0.15)


def test_workers_divide_the_compute_multiply_the_machines_and_add_the_all_reduce():
    def estimate(workers: int, spot: bool = False) -> cost.TrainingCost:
        cloud = CloudConfig(trainer_accelerator="t4", trainer_workers=workers, trainer_spot=spot)
        return cost.training_cost(cloud, training_flops=1e18, steps=1000, gradient_bytes=4e8, utilization=0.5)

    one, two = estimate(1), estimate(2)
    assert one.compute_seconds == pytest.approx(1e18 / (65e12 * 0.5))
    assert two.compute_seconds == pytest.approx(one.compute_seconds / 2)
    assert one.all_reduce_seconds == 0 and two.all_reduce_seconds == pytest.approx(1000 * 4e8 / 2e9)
    hourly = cost.MACHINE_PRICES["n1-standard-8"][0] + cost.GPU_PRICES["NVIDIA_TESLA_T4"][0]
    assert one.on_demand_usd == pytest.approx(one.seconds / 3600 * hourly)
    assert two.on_demand_usd == pytest.approx(two.seconds / 3600 * 2 * hourly)
    shown = two.describe()
    assert "2 x n1-standard-8 (1 NVIDIA_TESLA_T4 each)" in shown and "400 MB per step, 1,000 steps" in shown
    assert f"prices of {cost.PRICES_AS_OF}" in shown and "on Spot VMs" in shown
