"""Every `hftfx` command in README.md and docs/ parses against the CLI as written; every `make` target exists;
every docs/ page README names is there. (Running them needs a pushed model, a cloud or a Hub.)"""

import re
import shlex
from pathlib import Path

import pytest

from pipeline import cli

ROOT = Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def fenced_commands(page: Path) -> list[str]:
    """Shell lines of the page's ```bash blocks, continuation lines joined, comments dropped."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


COMMANDS = [(page.relative_to(ROOT).as_posix(), c) for page in PAGES for c in fenced_commands(page)]


def test_the_pages_hold_commands_and_readme_is_short():
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(readme) <= 200
    assert next(i for i, line in enumerate(readme) if line == "## Your own data") < 80
    assert sum(1 for _, c in COMMANDS if c.startswith("bin/in-env hftfx")) >= 20


@pytest.mark.parametrize(("page", "command"), [c for c in COMMANDS if c[1].startswith("bin/in-env hftfx ")])
def test_hftfx_commands_parse_against_the_cli(page, command):
    args = shlex.split(command.removeprefix("bin/in-env hftfx "))
    try:
        cli.build_parser().parse_args(args)
    except SystemExit as error:
        pytest.fail(f"{page}: `{command}` does not parse (exit {error.code})")


@pytest.mark.parametrize(("page", "command"), [c for c in COMMANDS if c[1].startswith("make ")])
def test_make_targets_exist(page, command):
    targets = set(re.findall(r"(?m)^([a-z][a-z-]*):", (ROOT / "Makefile").read_text()))
    assert command.split()[1] in targets, f"{page}: {command}"


def test_the_docs_readme_names_exist():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"docs/[a-z-]+\.md", readme))
    assert named and all((ROOT / name).is_file() for name in named), named


def _rate(value: float) -> str:
    """1e-4, 3e-5: how README writes a learning rate."""
    mantissa, exponent = f"{value:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def readme_figures() -> dict[str, str]:
    """Each figure README quotes, in the phrase that quotes it, and where it comes from."""
    import json

    from components.scorer.rows import MAX_FIELD_CHARS
    from models.training.epochs import MAX_AUTO_EPOCHS, MIN_EXAMPLES_SEEN
    from models.training.lengths import COVERED_SHARE, WIDTH_MULTIPLE
    from models.training.long_and_few import FEW_EXAMPLES, LONG_TEXT_TOKENS, PLATEAU_EPOCHS, PLATEAU_RATE
    from models.training.recipe import SIZE_RULES
    from models.training.warm_start import WARM_EPOCH_SHARE, WARM_LEARNING_RATE_SHARE

    run = json.loads((ROOT / "pipeline" / "machine" / "default_run.json").read_text())
    (small, _, _), (base, clip, _), (large, _, _) = (rule[1:] for rule in SIZE_RULES)
    shares = {0.5: "half", 1 / 3: "a third"}
    return {
        f"about {run['wall_seconds'] / 60:.0f} minutes on a 2-core CPU at a {run['matmul_peak_gflops']:.0f} GFLOP/s "
        "fp32 matmul peak": "default_run.json (make bench)",
        f"test accuracy {run['accuracy']:.4f}, AUC {run['auc']:.4f}": "default_run.json (make bench)",
        f"the smallest multiple of {WIDTH_MULTIPLE} that holds {COVERED_SHARE:.0%} of them whole": "lengths.py",
        f"enough to train on {MIN_EXAMPLES_SEEN:,} examples, at most {MAX_AUTO_EPOCHS}": "epochs.py",
        f"{_rate(small)} for MiniLM-size encoders": "recipe.py",
        f"{_rate(base)} with clipping at norm {clip:g} for base-size ones": "recipe.py",
        f"{_rate(large)} for large ones": "recipe.py",
        f"long texts (median {LONG_TEXT_TOKENS} tokens or more) and few examples (under {FEW_EXAMPLES:,}), where that "
        f"plateau is long, get {PLATEAU_EPOCHS} epochs and at most {_rate(PLATEAU_RATE)}": "long_and_few.py",
        f"at most {_rate(PLATEAU_RATE)} on long texts and few examples": "long_and_few.py",
        f"a field over {MAX_FIELD_CHARS:,} characters": "components/scorer/rows.py",
        f"({shares[WARM_LEARNING_RATE_SHARE]} the learning rate, {shares[WARM_EPOCH_SHARE]} of the epochs": (
            "warm_start.py"
        ),
        **_peer_figures(),
    }


def _peer_figures() -> dict[str, str]:
    """README's sentence on `make bench-peers`, from its section of benchmarks/reference.json (fp32 rows)."""
    import json

    from benchmarks.peers import SECTION

    (section,) = [s for s in json.loads((ROOT / "benchmarks" / "reference.json").read_text())["sections"]
                  if s["heading"] == SECTION]  # fmt: skip
    rows = {name: cells for precision, name, *cells in section["rows"] if precision == "fp32"}
    (ours, theirs, _), training, scoring = rows["test accuracy"], rows["training examples/s"], rows["scoring rows/s"]
    return {
        f"training {training[2]} transformers' PyTorch": "BENCHMARKS.md (make bench-peers)",
        f"test accuracy {ours} to its {theirs}; batch scoring {scoring[2]} its pipeline": "BENCHMARKS.md",
    }


# Digits README holds that are names or others' facts, not figures of this project.
NOT_FIGURES = (
    "MiniLM-L6", "Python 3", "2-core", "fp32", "DeBERTa-v2/v3", "DeBERTa-v3", "transformers 5", "T5", "v5e", "UTF-8",
    "exits 2", "(512 tokens for BERT)", "paired 95% intervals",  # BERT's positions; TFMA's interval level
    "AVX2", "jina-embeddings-v3",
)  # fmt: skip


def test_every_figure_readme_quotes_is_the_codes_or_a_benchmarks():
    """The figures are where they are measured or decided; README quotes them, and holds no other figure."""
    prose = re.sub(r"```.*?```|`[^`]*`", "", (ROOT / "README.md").read_text(encoding="utf-8"), flags=re.S)
    prose = " ".join(prose.split())
    figures = readme_figures()
    missing = [phrase for phrase in figures if phrase not in prose]
    assert missing == [], "README no longer quotes these as the code or BENCHMARKS.md has them"
    for phrase in (*figures, *NOT_FIGURES):
        prose = prose.replace(phrase, "")
    assert re.findall(r"\d[\d,.]*(?:e-\d+)?%?", prose) == [], "a figure README quotes that no test checks"


def test_readme_and_the_layout_table_name_every_stage_folder():
    from tests.layers_test import STAGES

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    assert [s for s in sorted(STAGES) if f"{s}/`" not in readme] == []
    assert [s for s in sorted(STAGES) if f"`components/{s}/`" not in table] == []


def test_paths_named_in_comments_and_docs_exist():
    """A module path in a docstring, comment or page is a file of the tree (paths moved with their files)."""
    named = re.compile(r"(?<![\w/.:\"-])((?:components|models|pipeline|benchmarks|tests|bin)/[\w/.-]*\w)")
    pages = [*PAGES, ROOT / "BENCHMARKS.md"]
    sources = [
        p
        for folder in ("components", "models", "pipeline", "benchmarks", "tests")
        for p in (ROOT / folder).rglob("*.py")
    ]
    missing = set()
    for path in [*pages, *sources]:
        for name in named.findall(path.read_text(encoding="utf-8")):
            module = re.sub(r"(\.py)?\.\w+$", "", name) + ".py"  # tests/user_datasets.long_document_rows
            if "*" not in name and not (ROOT / name).exists() and not (ROOT / module).exists():
                missing.add(f"{path.relative_to(ROOT)}: {name}")
    assert sorted(missing) == []
