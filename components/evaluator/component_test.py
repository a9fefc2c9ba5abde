from tfx.types import standard_artifacts

from components.evaluator.component import SameTaskLatestBlessedModelStrategy


def _model(model_id: int):
    model = standard_artifacts.Model()
    model.id = model_id
    return model


def _blessing(model_id: int, task_key: str | None, blessed: int = 1):
    blessing = standard_artifacts.ModelBlessing()
    blessing.set_int_custom_property("current_model_id", model_id)
    blessing.set_int_custom_property("blessed", blessed)
    if task_key is not None:
        blessing.set_string_custom_property("task_key", task_key)
    return blessing


def _resolve(task_key, models, blessings):
    strategy = SameTaskLatestBlessedModelStrategy(task_key=task_key)
    return strategy.resolve_artifacts(None, {"model": models, "model_blessing": blessings})


def test_the_latest_blessed_model_of_the_same_task_only():
    models = [_model(i) for i in (1, 2, 3, 4, 5)]
    blessings = [
        _blessing(1, "binary"),
        _blessing(2, "three"),
        _blessing(3, "binary", blessed=0),  # newer binary model, not blessed
        _blessing(4, "three"),
        _blessing(5, None),  # blessed before task contracts existed: never a baseline
    ]
    assert [m.id for m in _resolve("binary", models, blessings)["model"]] == [1]
    assert [m.id for m in _resolve("three", models, blessings)["model"]] == [4]


def test_a_task_with_no_blessed_model_resolves_to_none_the_first_of_its_task():
    result = _resolve("pairs", [_model(1)], [_blessing(1, "binary")])
    assert result == {"model": [], "model_blessing": []}
