"""Layers point one way: models/ imports nothing of ours, components/ imports models/, pipeline/ composes both,
benchmarks/ sits on top. Read from the source (every import, function-level ones included) with `ast`."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parent.parent
LAYERS = {"models": 0, "components": 1, "pipeline": 2, "benchmarks": 3}


def project_imports(path: Path) -> set[str]:
    """The modules of this project a file imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return {name for name in found if name.split(".")[0] in LAYERS}


def production_files() -> list[Path]:
    return [p for layer in LAYERS for p in sorted((ROOT / layer).rglob("*.py")) if not p.name.endswith("_test.py")]


def beside_module_tests() -> list[Path]:
    return [p for layer in LAYERS for p in sorted((ROOT / layer).rglob("*_test.py"))]


def upward_imports(paths: list[Path] | None = None) -> set[tuple[str, str]]:
    found = set()
    for path in production_files() if paths is None else paths:
        relative = path.relative_to(ROOT).as_posix()
        own = LAYERS[relative.split("/")[0]]
        for name in project_imports(path):
            if LAYERS[name.split(".")[0]] > own:
                module = name if _is_module(name) else name.rsplit(".", 1)[0]
                found.add((relative, module))
    return found


def _is_module(name: str) -> bool:
    base = ROOT.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def test_no_layer_imports_one_above_it():
    assert sorted(upward_imports()) == []


def test_no_test_beside_a_module_imports_a_layer_above_it():
    """A test beside its module stays in its layer: it builds a lower layer's objects without the upper one."""
    assert sorted(upward_imports(beside_module_tests())) == []


def import_graph(granularity: str) -> dict[str, set[str]]:
    """module (or folder) -> the modules (folders) of ours it imports; granularity 'file' or 'folder'."""

    def node(module: str) -> str:
        if granularity == "file":
            return module
        is_package = (ROOT.joinpath(*module.split(".")) / "__init__.py").is_file()
        return module if is_package else module.rsplit(".", 1)[0]

    graph: dict[str, set[str]] = {}
    for path in production_files():
        module = path.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".").removesuffix(".__init__")
        targets = {name if _is_module(name) else name.rsplit(".", 1)[0] for name in project_imports(path)}
        source = node(module)
        graph.setdefault(source, set()).update(node(t) for t in targets if node(t) != source)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_itself_through_others():
    assert cycles(import_graph("file")) == []


def test_no_folder_imports_itself_through_others():
    assert cycles(import_graph("folder")) == []


# Where each kind of code lives (docs/development.md's table): a stage's component, module code, config section
# and helpers in its folder under components/; models/ by kind; only what several stages share at either top.
STAGES = {
    "example_gen",
    "example_validator",
    "transform",
    "trainer",
    "tuner",
    "evaluator",
    "pusher",
    "publisher",
    "scorer",
    "notifier",
}
SHARED_COMPONENT_MODULES = {"__init__", "vertex_clients", "run_parameters", "local_beam", "task_records"}
MODEL_KINDS = {"encoders", "tokenizers", "serving", "hardware", "hub", "training"}
# Facts every kind may use: config sections and the credential check of their values, errors, names, the task.
MODEL_GROUND_FLOOR = {"__init__", "config_section", "credentials", "errors", "environment", "names", "task"}


def _layout(layer: str) -> tuple[set[str], set[str]]:
    """(modules at the layer's top, its sub-packages), tests left out."""
    top = {p.stem for p in (ROOT / layer).glob("*.py") if not p.name.endswith("_test.py")}
    folders = {p.parent.name for p in (ROOT / layer).glob("*/__init__.py")}
    return top, folders


def test_each_stage_lives_in_its_own_folder():
    top, folders = _layout("components")
    assert top == SHARED_COMPONENT_MODULES, "a stage's module belongs in its folder, components/<stage>/"
    assert folders == STAGES


def test_models_are_grouped_by_kind():
    top, folders = _layout("models")
    assert top == MODEL_GROUND_FLOOR, "a module of one kind belongs in its folder, models/<kind>/"
    assert folders == MODEL_KINDS


def test_nothing_sits_loose_in_pipeline():
    """pipeline/ composes: each module belongs to a subject folder (config, orchestration, cli, cloud, ...)."""
    top, _ = _layout("pipeline")
    assert top == {"__init__"}, "a module of pipeline/ belongs in its subject's folder"


# A stage folder keeps TFX's own layout (tfx/components/<name>/): what the DAG builds in component.py, what TFX
# executes in executor.py. Checked on the classes written in each module (not those TFX's @component generates).
def _stage_modules() -> list[str]:
    return [
        path.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".")
        for stage in sorted(STAGES)
        for path in sorted((ROOT / "components" / stage).glob("*.py"))
        if not path.name.endswith("_test.py") and path.name != "__init__.py"
    ]


def misplaced_stage_classes() -> list[str]:
    import importlib
    import inspect

    from tfx.dsl.components.base.base_component import BaseComponent
    from tfx.dsl.components.base.base_executor import BaseExecutor

    found = []
    for name in _stage_modules():
        module = importlib.import_module(name)
        written = {n.name for n in ast.walk(ast.parse(inspect.getsource(module))) if isinstance(n, ast.ClassDef)}
        for cls in (c for _, c in inspect.getmembers(module, inspect.isclass) if c.__name__ in written):
            for base, home in ((BaseComponent, "component"), (BaseExecutor, "executor")):
                if issubclass(cls, base) and name.rsplit(".", 1)[-1] != home:
                    found.append(f"{name}.{cls.__name__} is a {base.__name__}: it belongs in {home}.py")
    return found


def test_stage_components_and_executors_live_in_their_own_files():
    assert misplaced_stage_classes() == []


MAX_FUNCTION_LINES = 50  # a function longer than a screen does several things: name them


def long_functions() -> list[str]:
    """Every function (nested ones too) of the project's Python over MAX_FUNCTION_LINES, docstring included."""
    paths = [*ROOT.glob("*.py"), *(p for folder in [*LAYERS, "tests"] for p in (ROOT / folder).rglob("*.py"))]
    found = []
    for path in sorted(paths):
        relative = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{relative}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_passes_fifty_lines():
    assert long_functions() == []
