"""The layers of docs/ARCHITECTURE.md, held by the imports each package makes."""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "cluster_manager"

# Of this project, what each part may import besides itself, lowest layer first. A new
# package or loose module fails `test_every_part_has_a_place` until it is given a line here
# (and in docs/ARCHITECTURE.md).
LAYERS: dict[str, set[str]] = {
    # The files the package ships: gpus.yml, migrations, example tasks.
    "data": set(),
    # The domain: tasks, submissions, runs, GPU types, scoring. No adapter.
    "core": {"data"},
    # What runs on a GPU machine: the sandbox, the vendors' counters, the harness, and what
    # ships beside it to runner machines.
    "sandbox": {"core"},
    "telemetry": {"core"},
    "harness": {"core", "sandbox", "telemetry"},
    "runners": {"core", "harness"},
    # Adapters: Postgres (every SQL string) and the places runs go.
    "storage": {"core", "data"},
    "launchers": {"core", "runners"},
    # The application: the service every front end calls, and the queue's consumer.
    "service": {"core", "data", "storage", "launchers"},
    "scheduling": {"core", "storage", "launchers"},
    # Text and images made from the service's records, shared by the front ends.
    "rendering": {"core", "service"},
    # The composition root: settings from the environment, and the app that wires the parts.
    "settings": {"core"},
    "app": {"core", "settings", "storage", "launchers", "service", "scheduling"},
    # Front ends. The HTTP server is two packages, the API and the pages it serves; the bot
    # hosts a scheduler in its own process; the CLI starts every other front end.
    "api": {"core", "data", "service", "rendering", "settings", "web"},
    "web": {"core", "data", "service", "rendering", "api"},
    "discord": {"core", "data", "service", "rendering", "app", "scheduling"},
    "cli": {
        *("core", "data", "service", "rendering", "settings", "app", "scheduling"),
        *("api", "discord", "harness", "sandbox"),
    },
    "__main__": {"cli"},
    "__init__": set(),
}
LOOSE_MODULES = {"__init__", "__main__", "app", "settings"}
FRONT_ENDS = {"api", "web", "discord", "cli"}

# What runs on a GPU machine imports, beyond the standard library, only these (torch is
# imported by the task's code and the harness's workers, never at module level here).
RUNNER_THIRD_PARTY = {"cryptography", "torch", "numpy"}
# The task's and the submission's own modules, which the built-in harness imports by name.
TASK_MODULES = {"reference", "submission"}
CORE_THIRD_PARTY = {"yaml", "cryptography"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST, *, runtime_only: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif runtime_only and isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                yield from _import_nodes(
                    ast.Module(body=[child], type_ignores=[]), runtime_only=True
                )
        else:
            yield from _import_nodes(node, runtime_only=runtime_only)


def _imports(path: Path, *, runtime_only: bool = False) -> set[str]:
    """Every module the file imports, relative imports made absolute; `from a import b`
    counts as `a.b` where that is a module of this project."""
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    names = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in _import_nodes(tree, runtime_only=runtime_only):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
            continue
        base = package[: len(package) - node.level + 1] if node.level else []
        module = ".".join([*base, *([node.module] if node.module else [])])
        for alias in node.names:
            sub = f"{module}.{alias.name}"
            names.add(sub if _is_module(sub) else module)
    return names


def _is_module(name: str) -> bool:
    if not name.startswith("cluster_manager"):
        return False
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _part(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "cluster_manager" and len(parts) > 1 else None


def _third_party(module: str) -> str | None:
    top = module.split(".")[0]
    if top in sys.stdlib_module_names or top in {"cluster_manager", "__future__", *TASK_MODULES}:
        return None
    return top


def _files(part: str) -> list[Path]:
    if (PACKAGE / f"{part}.py").is_file():
        return [PACKAGE / f"{part}.py"]
    return sorted((PACKAGE / part).rglob("*.py"))


def test_every_part_has_a_place_and_few_modules_stay_loose():
    parts = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    loose = {p.stem for p in PACKAGE.glob("*.py")}
    assert loose <= LOOSE_MODULES
    assert len(loose) <= 4
    assert parts | loose == set(LAYERS)


@pytest.mark.parametrize("part", sorted(LAYERS))
def test_each_part_imports_only_the_layers_it_may(part: str):
    wrong = [
        f"{path.relative_to(PACKAGE)} imports {module}"
        for path in _files(part)
        for module in _imports(path)
        if (own := _part(module)) is not None and own != part and own not in LAYERS[part]
    ]
    assert wrong == []


@pytest.mark.parametrize("front_end", sorted(FRONT_ENDS - {"cli"}))
def test_front_ends_are_handed_their_settings(front_end: str):
    """A front end receives `Settings`; it never reads or derives its own from them."""
    wrong = []
    for path in _files(front_end):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in _import_nodes(tree, runtime_only=False):
            if isinstance(node, ast.ImportFrom) and node.module == "cluster_manager.settings":
                wrong += [alias.name for alias in node.names if alias.name != "Settings"]
    assert wrong == []


def test_no_import_cycle():
    """Between this project's modules, counting every import that runs (at a module's top
    or inside a function), not those only a type checker reads."""
    graph = {
        _module_name(path): {
            m
            for m in _imports(path, runtime_only=True)
            if _is_module(m) and m != _module_name(path)
        }
        for path in PACKAGE.rglob("*.py")
    }
    # A package's `__init__` runs before its modules; importing the package from a module of
    # its own is not a cycle of design.
    for module, targets in graph.items():
        targets -= {t for t in targets if module.startswith(f"{t}.")}
    assert _cycles(graph) == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while (member := stack.pop()) != node:
                component.append(member)
            if component:
                found.append(sorted([node, *component]))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


@pytest.mark.parametrize(
    ("part", "allowed"),
    [
        ("core", CORE_THIRD_PARTY),
        ("sandbox", set()),
        ("harness", RUNNER_THIRD_PARTY),
        # The vendors' management libraries, imported only when their probe opens.
        ("telemetry", {"pynvml", "amdsmi"}),
        # The Modal function imports Modal's own module, which Modal's image has.
        ("runners", {"modal"}),
    ],
)
def test_what_runs_on_a_gpu_machine_needs_none_of_the_bots_dependencies(part, allowed):
    foreign = [
        f"{path.relative_to(PACKAGE)} imports {module}"
        for path in _files(part)
        for module in _imports(path)
        if (top := _third_party(module)) is not None and top not in allowed
    ]
    assert foreign == []


# A module does one job and a function one step; these bounds keep them readable.
MAX_MODULE_LINES = 420
MAX_FUNCTION_LINES = 60


def test_modules_and_functions_stay_small():
    too_long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(PACKAGE)
        if text.count("\n") > MAX_MODULE_LINES:
            too_long.append(f"{where}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{where}: {node.name} is {length} lines")
    assert too_long == []


# A line of a package's docstring that names one of its modules or folders, then says what it
# holds: `    jobs.py    the durable job queue`.
LISTED = re.compile(r"^\s*([A-Za-z_]\w*(?:\.py|/))(?:\s|$)", re.MULTILINE)
PACKAGES = sorted(p.parent for p in PACKAGE.rglob("__init__.py"))


@pytest.mark.parametrize(
    "package", PACKAGES, ids=[str(p.relative_to(PACKAGE.parent)) for p in PACKAGES]
)
def test_each_package_lists_its_modules(package: Path):
    """docs/ARCHITECTURE.md sends the reader to each package's `__init__` for what it holds:
    every module and sub-package is named there, and nothing that is gone."""
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text("utf-8"))) or ""
    listed = set(LISTED.findall(doc))
    modules = {p.name for p in package.glob("*.py")} - {"__init__.py"}
    subpackages = {f"{p.parent.name}/" for p in package.glob("*/__init__.py")}
    folders = {f"{p.name}/" for p in package.iterdir() if p.is_dir()} - {"__pycache__/"}
    assert sorted((modules | subpackages) - listed) == []
    assert sorted(listed - modules - folders) == []
