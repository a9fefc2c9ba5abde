import pytest

from models.task import task_contract, write_contract
from pipeline import configs
from pipeline.orchestration.preflight import ServingContractError, check_serving_contract


def _config(tmp_path, **overrides):
    return configs.load_config(overrides={"serving_dir": str(tmp_path / "serving"), **overrides})


def _serve(config, version: str, contract):
    folder = config.push_base_directory + f"/{version}"
    write_contract(folder, contract)


BINARY = task_contract(["neg", "pos"], ["text"])


def test_nothing_served_yet_and_the_same_contract_pass(tmp_path):
    config = _config(tmp_path)
    check_serving_contract(config, BINARY)
    _serve(config, "100", BINARY)
    check_serving_contract(config, BINARY)


@pytest.mark.parametrize(
    ("contract", "said"),
    [
        (task_contract(["pos", "neg"], ["text"]), "label order"),
        (task_contract(["a", "b", "c"], ["text"]), "label set"),
        (task_contract(["neg", "pos"], ["text", "text_pair"]), "inputs"),
    ],
)
def test_another_contract_under_the_served_name_is_refused_with_the_fixes(tmp_path, contract, said):
    config = _config(tmp_path)
    _serve(config, "100", task_contract(["x", "y"], ["text"]))
    _serve(config, "200", BINARY)  # the newest version is what clients get
    with pytest.raises(ServingContractError) as error:
        check_serving_contract(config, contract)
    message = str(error.value)
    assert "version 200" in message and said in message
    assert "--set model_name=NAME" in message and "replace_serving_contract=true" in message
    check_serving_contract(_config(tmp_path, replace_serving_contract=True), contract)
    check_serving_contract(_config(tmp_path, model_name="other"), contract)
