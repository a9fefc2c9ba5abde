"""Every error class the project defines is a UserError, and the CLI treats exactly those as the user's."""

import importlib
import inspect
import pkgutil

import pytest

import components
import models
import pipeline
from models.errors import UserError
from pipeline import cli


def project_exceptions() -> list[type]:
    found = []
    for package in (pipeline, components, models):
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if info.name.endswith("_test") or info.name.endswith("__main__"):
                continue
            module = importlib.import_module(info.name)
            found += [
                cls
                for _, cls in inspect.getmembers(module, inspect.isclass)
                if issubclass(cls, BaseException) and cls.__module__ == module.__name__
            ]
    return found


def test_every_project_error_is_a_user_error():
    errors = project_exceptions()
    assert len(errors) >= 17, [e.__name__ for e in errors]  # the walk found the modules
    assert [e.__name__ for e in errors if not issubclass(e, UserError)] == []


def test_the_cli_exits_2_with_the_message_for_a_user_error_and_keeps_a_bugs_traceback(monkeypatch, capsys):
    from components.example_validator.executor import DataAnomaliesError

    def anomalies(args):
        raise DataAnomaliesError("split train: feature 'text' is missing in 3% of examples")

    monkeypatch.setattr(cli, "cmd_doctor", anomalies)
    assert cli.main(["doctor"]) == 2
    assert "hftfx: split train: feature 'text' is missing" in capsys.readouterr().err

    def bug(args):
        raise KeyError("a bug")

    monkeypatch.setattr(cli, "cmd_doctor", bug)
    with pytest.raises(KeyError):
        cli.main(["doctor"])
