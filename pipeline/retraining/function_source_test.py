"""What a profile needs before the storage-event function's folder is written, and the deploy command printed."""

from pathlib import Path

import pytest

from pipeline.config import pipeline_config
from pipeline.retraining.function_source import check_event_profile, deploy_command

PROFILE = Path(__file__).resolve().parents[2] / "configs" / "vertex-retraining.yaml"


def test_the_deploy_command_retries_and_runs_as_the_functions_own_identity():
    config = pipeline_config.load_config(PROFILE)
    check_event_profile(config)
    command = deploy_command(config, Path("build/f"))
    assert "--retry" in command
    identity = config.retraining.event_service_account
    assert command[command.index("--service-account") + 1] == identity != config.cloud.service_account
    assert command[command.index("--trigger-service-account") + 1] == identity
    assert "bucket=my-hftfx-data" in command


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"dataset.ready_marker": ""}, "would train on a half-uploaded span"),
        ({"retraining.event_service_account": ""}, "must name the function's own service account"),
        ({"retraining.policy": "drift"}, "applies retraining.policy new_data"),
    ],
)
def test_a_profile_events_cannot_drive_safely_is_refused(overrides, message):
    with pytest.raises(pipeline_config.ConfigError, match=message):
        check_event_profile(pipeline_config.load_config(PROFILE, overrides))
