"""The Tuner's oracle and search space as the config selects them (the trials themselves: tests/tuning_e2e_test.py)."""

import keras_tuner
import pytest

from components.tuner.config import TuningConfig
from components.tuner.module import oracle, search_space


@pytest.mark.parametrize(
    ("algorithm", "kind"),
    [
        ("bayesian", keras_tuner.oracles.BayesianOptimizationOracle),
        ("random", keras_tuner.oracles.RandomSearchOracle),
    ],
)
@pytest.mark.parametrize(("objective", "direction"), [("val_loss", "min"), ("val_accuracy", "max")])
def test_the_oracle_follows_the_algorithm_and_the_objectives_direction(algorithm, kind, objective, direction):
    tuning = TuningConfig(trials=4, algorithm=algorithm, objective=objective)
    chosen = oracle(tuning)
    assert type(chosen) is kind and chosen.max_trials == 4
    assert (chosen.objective.name, chosen.objective.direction) == (objective, direction)


def test_ranges_become_int_or_float_hyperparameters_and_lists_choices():
    search = {"batch_size": {"min": 8, "max": 64}, "learning_rate": {"min": 1e-5, "max": 1e-3}, "epochs": [1, 2]}
    tuning = TuningConfig(trials=2, search=search)
    space = {hp.name: hp for hp in search_space(tuning).space}
    assert type(space["batch_size"]).__name__ == "Int" and space["batch_size"].sampling == "log"
    assert type(space["learning_rate"]).__name__ == "Float" and space["learning_rate"].max_value == 1e-3
    assert type(space["epochs"]).__name__ == "Choice" and space["epochs"].values == [1, 2]
