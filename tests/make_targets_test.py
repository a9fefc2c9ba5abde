"""Every command a Makefile target runs in the environment is started by a test, so a refactor cannot break one
unnoticed: `make bench` once died parsing its arguments after the config moved to pydantic, and nothing ran it.

Each `bin/in-env python -m MODULE` and `bin/in-env hftfx COMMAND` line of the Makefile has its whole argument
parser built (`--help`); the benchmarks also run a tiny configuration of themselves, writing into a scratch copy
of benchmarks/reference.json and BENCHMARKS.md.
"""

from __future__ import annotations

import importlib
import re
import shlex
import shutil
from pathlib import Path

import pytest

from benchmarks import reference

ROOT = Path(__file__).resolve().parents[1]
# The tools the environment brings (ruff, pytest) are started by `make test` itself.
TOOLS = {"ruff", "pytest"}
# Where the real work of each command is run beyond its argument parsing.
STARTED_BY = {
    "hftfx run": "tests/hub_push_test.py and tests/faults_test.py (tiny_run_command), and bench-seeds below",
    "hftfx doctor": "test_doctor_measures_and_estimates in this file",
    "python -m benchmarks.bench": "test_bench_runs_a_tiny_configuration (slow: MiniLM steps, a step profile)",
    "python -m benchmarks.scale": "test_bench_scale_runs_a_tiny_configuration",
    "python -m benchmarks.seeds": "test_bench_seeds_runs_a_tiny_recipe (slow: a whole tiny run)",
    "python -m benchmarks.long_documents": "test_bench_long_runs_a_tiny_configuration (slow: a whole tiny run)",
    "python -m benchmarks.tuning": "test_bench_tuning_runs_a_tiny_search (slow: two tiny runs, one tuned)",
    "python -m benchmarks.gate": "test_bench_gate_runs_three_tiny_runs_in_one_root (slow: three tiny runs)",
    "python -m benchmarks.bounded_inputs": "test_bench_inputs_runs_a_tiny_configuration (slow: a tokenizer trained)",
    "python -m benchmarks.encoders": "test_bench_encoders_runs_a_tiny_configuration (slow: MiniLM steps, two ways)",
    "python -m benchmarks.workers": "test_bench_workers_runs_a_tiny_configuration (slow: a tiny run, three trainings)",
    "python -m benchmarks.warm_start": "test_bench_warm_start_runs_three_tiny_runs (slow: three tiny runs)",
    "python -m benchmarks.peers": "test_bench_peers_runs_a_tiny_configuration (slow: a tiny run and PyTorch's)",
    "bin/setup-env": "make test itself: setup is its first step",
    "bin/build-image": "tests/image_test.py (slow: podman, a 4 GB image)",
    "bin/check-image": "tests/image_test.py (slow: podman, a 4 GB image)",
    "bin/kfp-local": "tests/kfp_local_test.py (slow: podman's Docker API and the pipeline image)",
}


def recipe_commands() -> dict[str, list[str]]:
    """Target -> the commands its recipe runs: `bin/in-env` ones without $(ARGS), and the project's bin/ scripts."""
    commands: dict[str, list[str]] = {}
    target = ""
    for line in (ROOT / "Makefile").read_text().splitlines():
        if match := re.match(r"^([\w-]+):", line):
            target = match.group(1)
        elif line.startswith("\t") and "bin/in-env " in line:
            words = shlex.split(line.split("bin/in-env ", 1)[1].replace("$(ARGS)", ""))
            command = " ".join(words[:3] if words[0] == "python" else words[:2])
            commands.setdefault(target, []).append(command)
        elif line.startswith("\t") and (match := re.search(r"(bin/[\w-]+)", line)):
            commands.setdefault(target, []).append(match.group(1))
    return commands


def entry_points() -> list[str]:
    """The Python entry points the Makefile runs in the environment."""
    found = {c for commands in recipe_commands().values() for c in commands}
    return sorted(c for c in found if c.split()[0] in ("python", "hftfx"))


def test_every_command_the_makefile_runs_is_started_by_a_test():
    commands = recipe_commands()
    assert {"setup", "run", "test", "bench", "bench-scale", "bench-seeds", "image", "doctor"} <= set(commands)
    found = {c for listed in commands.values() for c in listed if c.split()[0] not in TOOLS}
    assert found == set(STARTED_BY), "a Makefile command without a test that starts it"
    for script, starter in STARTED_BY.items():
        if script.startswith("bin/") and starter.startswith("tests/"):
            assert script.removeprefix("bin/") in (ROOT / starter.split()[0]).read_text()


@pytest.mark.parametrize("command", entry_points())
def test_each_entry_point_parses_its_arguments(command, capsys):
    words = command.split()
    if words[0] == "python":
        main, argv = importlib.import_module(words[2]).main, ["--help"]
    else:
        from pipeline import cli

        main, argv = cli.main, [words[1], "--help"]
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("usage:")


@pytest.fixture
def scratch_reference(tmp_path, monkeypatch) -> Path:
    """benchmarks/reference.json copied to a scratch folder, where the benchmarks write; returns BENCHMARKS.md's
    scratch path."""
    copy = tmp_path / "reference.json"
    shutil.copy(reference.REFERENCE, copy)
    monkeypatch.setattr(reference, "REFERENCE", copy)
    return tmp_path / "BENCHMARKS.md"


def tiny_settings(workdir: Path, model_dir: Path) -> list[str]:
    """`--set` values for a whole run of the tiny BERT on a few hundred rows, anything blessed."""
    from tests.tiny_model import tiny_overrides

    flat = {**tiny_overrides(workdir, model_dir, 32), "dataset.limits": {"train": 128, "eval": 32, "test": 64}}
    settings = []
    for key, value in flat.items():
        if isinstance(value, dict):
            settings += [f"{key}.{name}={inner}" for name, inner in value.items()]
        elif key not in ("pipeline_root", "serving_dir"):  # bench-seeds gives each seed its own
            settings.append(f"{key}={value}")
    return settings


def test_doctor_measures_and_estimates(capsys):
    from pipeline import cli

    assert cli.main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "GFLOP/s" in out


@pytest.mark.slow  # a whole tiny run (60 s); `hftfx run` itself is started in the fast suite by hub_push/faults tests
def test_bench_seeds_runs_a_tiny_recipe(tmp_path, tiny_bert_dir, scratch_reference):
    from benchmarks import seeds

    settings = tiny_settings(tmp_path, tiny_bert_dir)
    argv = ["--seeds", "3", "--out", str(scratch_reference)]
    for setting in settings:
        argv += ["--set", setting]
    assert seeds.main(argv) == 0
    (section,) = [s for s in reference.read()["sections"] if s["heading"] == seeds.heading(settings)]
    assert [row[0] for row in section["rows"]] == ["3", "mean ± sd"]
    assert section["heading"] in scratch_reference.read_text()


@pytest.mark.slow  # a whole tiny run (70 s)
def test_bench_long_runs_a_tiny_configuration(tmp_path, tiny_bert_dir, scratch_reference):
    from benchmarks import long_documents

    argv = ["--documents", "200", "--policies", "head_tail-64", "--layout", "between", "--out", str(scratch_reference)]
    settings = [s for s in tiny_settings(tmp_path, tiny_bert_dir) if not s.startswith("model.max_seq_length")]
    for setting in settings:  # the policy sets the width
        argv += ["--set", setting]
    previous = {s["heading"]: s for s in reference.read()["sections"]}.get(long_documents.SECTION, {"rows": []})
    assert long_documents.main(argv) == 0
    (section,) = [s for s in reference.read()["sections"] if s["heading"] == long_documents.SECTION]
    # the review between two plots (the layout's pages); a recipe changed with --set names its row
    name = ", ".join(["head_tail at 64, review between", *settings])
    others = [row for row in previous["rows"] if row[0] != name]
    assert [row for row in section["rows"] if row[0] != name] == others  # kept as measured then
    assert name in [row[0] for row in section["rows"]]
    assert not others or "Kept from an earlier run of this section" in " ".join(section["notes"])
    assert section["heading"] in scratch_reference.read_text()


@pytest.mark.slow  # a whole tiny run, then the tiny model in transformers' Trainer (the reference environment)
def test_bench_peers_runs_a_tiny_configuration(tmp_path, tiny_bert_dir, scratch_reference):
    from benchmarks import peers

    argv = ["--score-rows", "40", "--out", str(scratch_reference)]
    for setting in tiny_settings(tmp_path, tiny_bert_dir):
        argv += ["--set", setting]
    assert peers.main(argv) == 0
    (section,) = [s for s in reference.read()["sections"] if s["heading"] == peers.SECTION]
    rows = {(row[0], row[1]): row[2:] for row in section["rows"]}
    assert float(rows[("fp32", "test accuracy")][1]) > 0 and rows[("fp32", "training examples/s")][2].endswith("x")
    assert section["heading"] in scratch_reference.read_text()


@pytest.mark.slow  # two whole tiny runs, one with 2 trials before the Trainer; tests/tuning_e2e_test.py tunes too
def test_bench_tuning_runs_a_tiny_search(tmp_path, tiny_bert_dir, scratch_reference):
    from benchmarks import tuning

    argv = ["--trials", "2", "--out", str(scratch_reference)]
    for setting in tiny_settings(tmp_path, tiny_bert_dir):
        argv += ["--set", setting]
    assert tuning.main(argv) == 0
    (section,) = [s for s in reference.read()["sections"] if s["heading"] == tuning.SECTION]
    assert [row[0] for row in section["rows"]] == ["default recipe", "tuned (2 trials)"]
    assert (
        section["notes"][0].startswith("Best trial: score ")
        and "x the default run's wall x peak" in (section["notes"][2])
    )


@pytest.mark.slow  # three whole tiny runs; tests/slices_and_warm_start_e2e_test.py warm-starts in CI
def test_bench_warm_start_runs_three_tiny_runs(tmp_path, tiny_bert_dir, scratch_reference):
    from benchmarks import warm_start

    argv = ["--seeds", "42", "--span-rows", "160", "--test-rows", "64", "--out", str(scratch_reference)]
    for setting in tiny_settings(tmp_path, tiny_bert_dir):
        if not setting.startswith("dataset.limits"):
            argv += ["--set", setting]
    assert warm_start.main(argv) == 0
    (section,) = [s for s in reference.read()["sections"] if s["heading"] == warm_start.SECTION]
    assert [row[1:3] for row in section["rows"]] == [
        ["span 1 cold", "cold"],
        ["span 2 warm", "warm"],
        ["span 2 cold", "cold"],
    ]
    assert section["notes"][1].startswith("The warm retrain costs ")


@pytest.mark.slow  # three whole tiny runs; tests/retrain_gate_e2e_test.py is the same scenario on MiniLM
def test_bench_gate_runs_three_tiny_runs_in_one_root(tmp_path, tiny_bert_dir, scratch_reference):
    from benchmarks import gate

    argv = ["--out", str(scratch_reference)]
    for setting in tiny_settings(tmp_path, tiny_bert_dir):
        argv += ["--set", setting]
    assert gate.main(argv) == 0
    (section,) = [s for s in reference.read()["sections"] if s["heading"] == gate.SECTION]
    assert [row[0] for row in section["rows"]] == ["seed 42", "seed 1", "seed 2, learning rate 1e-6"]
    assert section["rows"][0][3] == "none: first of its task" and "(" in section["rows"][1][3]


@pytest.mark.slow  # a tokenizer trained and a corpus pass (about 25 s); its parser is built above
def test_bench_inputs_runs_a_tiny_configuration(scratch_reference):
    from benchmarks import bounded_inputs

    argv = ["--corpus-rows", "256", "--repeats", "2", "--word-chars", "5000", "--whole-chars", "600", "--widths", "8"]
    assert bounded_inputs.main([*argv, "--out", str(scratch_reference)]) == 0
    (section,) = [s for s in reference.read()["sections"] if s["heading"] == bounded_inputs.SECTION]
    names = [row[0].split(":")[0] for row in section["rows"]]
    assert names[:3] == [
        "MiniLM's WordPiece at width 128, 256 reviews",
        "byte-level BPE at width 8",
        "· its first 600 letters merged whole (no budget, no pieces) vs as served (s)",
    ]
    families = bounded_inputs.FAMILY_TOKENIZERS.values()
    assert names[3:23] == [f"{kind} at width 8" for kind in families for _ in bounded_inputs.WHITESPACE_KINDS]
    assert names[23:25] == [
        f"byte-level BPE, {split}, at width 8 with a 64-character entry (budget 1,024)"
        for split in bounded_inputs.LONG_ENTRY_FAMILIES.values()
    ]
    assert names[25:27] == ["WordPiece (MiniLM) at width 8", "WordPiece (MiniLM) at width 8, 4 windows"]
    assert names[27:] == [
        f"{kind}, --check's length sample for 8 positions"
        for kind in ("WordPiece (MiniLM)", "byte-level BPE", "SentencePiece")
    ]


@pytest.mark.slow
def test_bench_encoders_runs_a_tiny_configuration(scratch_reference):
    from benchmarks import encoders

    argv = ["--steps", "2", "--repeats", "1", "--widths", "", "--memory-width", "0", "--out", str(scratch_reference)]
    assert encoders.main(argv) == 0
    (section,) = [s for s in reference.read()["sections"] if s["heading"] == encoders.SECTION]
    assert [row[0].split(":")[0] for row in section["rows"]] == ["MiniLM-L6 Trainer loop, fp32, our encoder"]


@pytest.mark.slow
def test_bench_workers_runs_a_tiny_configuration(tiny_bert_dir, scratch_reference):
    from benchmarks import workers

    assert workers.main(["--train", "64", "--model", str(tiny_bert_dir), "--out", str(scratch_reference)]) == 0
    (section,) = [s for s in reference.read()["sections"] if s["heading"] == workers.SECTION]
    assert [row[:2] for row in section["rows"]] == [
        ["1 (global batch 32)", "the only one"], ["2 (16 per replica)", "chief"], ["2 (16 per replica)", "worker 0"]
    ]  # fmt: skip


@pytest.mark.slow  # an ExampleGen pass over 300 rows in a Beam pipeline (42 s); its parser is built above
def test_bench_scale_runs_a_tiny_configuration(tmp_path, scratch_reference):
    from benchmarks import scale

    argv = ["--sizes", "300", "--modes", "in_memory", "--predict-sizes", "", "--out", str(scratch_reference)]
    assert scale.main(argv) == 0
    (section,) = [s for s in reference.read()["sections"] if s["heading"] == scale.SECTION]
    assert section["rows"][0][:2] == ["in_memory", "300"]


@pytest.mark.slow
def test_bench_runs_a_tiny_configuration(tmp_path, scratch_reference, monkeypatch):
    from benchmarks import bench

    monkeypatch.setattr(bench, "DEFAULT_RUN_FILE", tmp_path / "default_run.json")
    argv = [
        "--steps", "3", "--profiled-steps", "2", "--repeats", "2", "--batch-rows", "64", "--corpus-rows", "64",
        "--serving-dir", str(tmp_path / "no-model"), "--pipeline-root", str(tmp_path / "no-runs"),
        "--out", str(scratch_reference),
    ]  # fmt: skip
    assert bench.main(argv) == 0
    names = [row["name"] for row in reference.read()["bench"]["rows"]]
    assert any(name.startswith("in-graph tokenization vs HF fast") for name in names)
    assert any(name.startswith("Trainer loop, fp32") for name in names)
    assert any("run `make run` first" in name for name in names)
    assert "# Benchmarks" in scratch_reference.read_text()
