import pytest

from models.config_section import ConfigError
from pipeline.cli import build_parser
from pipeline.cli.commands import _log_settings


def test_serving_log_keys_set_the_log_and_each_flag_wins_over_its_key(tmp_path):
    config = tmp_path / "serve.yaml"
    config.write_text(f"serving:\n  log_dir: {tmp_path / 'logs'}\n  log_sample: 0.1\n  log_texts: hash\n")
    served = build_parser().parse_args(["serve", "--config", str(config), "--log-sample", "0.5"])
    settings = _log_settings(served)
    assert (settings.log_dir, settings.sample, settings.texts) == (str(tmp_path / "logs"), 0.5, "hash")
    scored = build_parser().parse_args(["predict", "--input", "x.csv", "--config", str(config)])
    assert _log_settings(scored).sample == 0.1
    assert _log_settings(build_parser().parse_args(["serve"])) is None  # off by default
    with pytest.raises(ConfigError, match=r"serving\.log_sample = '2': should be at most 1"):
        _log_settings(build_parser().parse_args(["serve", "--log-dir", "logs", "--log-sample", "2"]))


def test_the_monitor_reads_the_configs_log_folder_unless_told_another(tmp_path, capsys):
    from pipeline.cli import main

    assert main(["monitor"]) == 2
    assert "(or the config's serving.log_dir), --bigquery TABLE or --endpoint" in capsys.readouterr().err
    config = tmp_path / "serve.yaml"
    config.write_text(f"serving:\n  log_dir: {tmp_path / 'logs'}\n")
    assert main(["monitor", "--config", str(config)]) == 2
    assert f"{tmp_path / 'logs'} holds no prediction logs" in capsys.readouterr().err
