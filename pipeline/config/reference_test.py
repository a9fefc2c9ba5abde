from pathlib import Path

from pipeline import cli
from pipeline.cli.commands import overrides_from_flags
from pipeline.config import pipeline_config
from pipeline.config import reference as config_reference

ROOT = Path(__file__).parents[2]


def test_every_setting_says_what_it_is_for():
    assert [s.key for s in config_reference.settings() if not s.field.description] == []


def test_docs_config_reference_is_generated_from_the_fields():
    written = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    assert written == config_reference.markdown(), "regenerate: python -m pipeline.config.reference > docs/config.md"


def test_run_help_shows_each_flag_with_its_fields_description_and_key():
    run_parser = cli.build_parser()._subparsers._group_actions[0].choices["run"]
    help_text = " ".join(run_parser.format_help().split())
    flags = config_reference.run_flags()
    assert {f.flag for f in flags} >= {"--epochs", "--model", "--dataset", "--train-limit", "--precision"}
    for run_flag in flags:
        assert f"{' '.join(run_flag.help.split())} [{run_flag.key}]" in help_text


def test_flags_set_their_keys_and_the_config_checks_their_values():
    args = cli.build_parser().parse_args(
        ["run", "--epochs", "3", "--train-limit", "50", "--label-names", "neg, pos", "--precision", "fp32"]
    )
    overrides = overrides_from_flags(args)
    assert overrides == {
        "training.epochs": "3",
        "dataset.limits.train": "50",
        "dataset.label_names": ["neg", "pos"],
        "training.precision": "fp32",
    }
    config = pipeline_config.load_config(overrides=overrides)
    assert (config.training.epochs, config.dataset.limits, config.dataset.label_names) == (
        3,
        {"train": 50},
        ("neg", "pos"),
    )
