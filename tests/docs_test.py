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


def test_readme_quotes_the_reference_run_as_recorded():
    """README's headline is the recorded default run's (make bench writes it), never a figure typed twice."""
    import json

    run = json.loads((ROOT / "pipeline" / "machine" / "default_run.json").read_text())
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert f"test accuracy {run['accuracy']:.4f}, AUC {run['auc']:.4f}" in readme
