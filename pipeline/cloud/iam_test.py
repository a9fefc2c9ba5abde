"""The IAM roles the code declares, as the docs and `hftfx doctor --cloud` list them."""

from pipeline import cli
from tests.cloud_specs import ROOT


def test_the_vertex_docs_list_the_iam_roles_the_code_declares():
    from pipeline.cloud.iam import GRANTS

    page = (ROOT / "docs" / "vertex.md").read_text()
    section = page[page.index("### IAM") :]
    rows = [line.split("|")[1:5] for line in section.splitlines() if line.startswith("| ") and "`roles/" in line]
    assert [(i.strip(), r.strip().strip("`"), s.strip(), w.strip()) for i, r, s, w in rows] == [
        (g.identity, g.role, g.scope, g.why) for g in GRANTS
    ]


def test_doctor_cloud_checks_the_profile_and_its_spec_offline_and_lists_the_roles(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert cli.main(["doctor", "--cloud", "--config", "configs/vertex.yaml"]) == 0
    out = capsys.readouterr().out
    assert "[OK] profile" in out and "[OK] compiled spec" in out
    assert "roles/aiplatform.user" in out and "roles/dataflow.worker" not in out  # the profile runs no Dataflow
    # actAs on the endpoint's identity, on that identity only: the first push would fail with 403 without it
    assert "roles/iam.serviceAccountUser          on cloud.serving_service_account: deploy the endpoint's" in out
    assert cli.main(["doctor", "--cloud", "--config", "configs/vertex.yaml", "--set", "cloud.region=europe-west4"]) == 1
    out = capsys.readouterr().out
    assert "[FAIL] compiled spec" in out and 'cloud.region ("us-central1" -> "europe-west4")' in out


def test_doctor_estimate_prices_the_profiles_trainer_on_its_workers(capsys):
    from pipeline import cli

    packaged = ["--set", "dataset.name=packaged:rotten_tomatoes", "--set", 'dataset.label_names=["rotten","fresh"]']
    args = ["doctor", "--estimate", "--config", "configs/vertex.yaml", *packaged, "--set", "cloud.trainer_workers=3"]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "10,251 training texts x 3 epoch(s) of packaged:all-MiniLM-L6-v2" in out
    assert "on Vertex AI, 3 x n1-standard-8: training ~" in out and "a ring all-reduce of 90 MB per step" in out
    assert "on demand" in out and "on Spot VMs (prices of 2026-11" in out


def test_run_check_on_a_vertex_profile_says_what_its_trainer_would_cost(tmp_path, capsys):
    from pipeline import cli

    packaged = ["--set", "dataset.name=packaged:rotten_tomatoes", "--set", 'dataset.label_names=["rotten","fresh"]']
    local = ["--pipeline-root", str(tmp_path / "root"), "--serving-dir", str(tmp_path / "serving")]
    args = ["run", "--check", "--config", "configs/vertex.yaml", *packaged, *local, "--train-limit", "400"]
    assert cli.main([*args, "--set", "cloud.trainer_spot=true"]) == 0
    out = capsys.readouterr().out
    (line,) = [line for line in out.splitlines() if line.startswith("[pipeline] cost: ")]
    assert "on Vertex AI, 1 x n1-standard-8: training ~" in line and "all-reduce" not in line
    assert "on Spot VMs (prices of 2026-11" in line
