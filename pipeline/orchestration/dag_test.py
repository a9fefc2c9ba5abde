"""Which Trainers the DAG hands a blessed model to start from (training.warm_start), without running anything."""

import pytest

from pipeline.config import pipeline_config
from pipeline.orchestration.dag import create_components

LABELS = {"dataset.label_names": ["rotten", "fresh"]}


def trainer_inputs(**overrides) -> set[str]:
    config = pipeline_config.load_config(overrides={**LABELS, **overrides})
    (trainer,) = [c for c in create_components(config) if c.id == "Trainer"]
    return set(trainer.inputs)


SPANNED = {"dataset.name": "csv", "dataset.data_files": ["data/span-{SPAN}/*.csv"]}


@pytest.mark.parametrize(
    ("overrides", "warm"),
    [
        ({}, False),  # auto, data without spans: every run a fresh fine-tune
        (SPANNED, True),  # auto, a span retrain
        ({**SPANNED, "training.warm_start": "never"}, False),
        ({"training.warm_start": "always"}, True),
    ],
    ids=["auto unspanned", "auto spanned", "never", "always"],
)
def test_the_trainer_gets_the_latest_blessed_model_where_a_warm_start_is_asked(overrides, warm):
    assert ("base_model" in trainer_inputs(**overrides)) is warm
