"""The layers of docs/ARCHITECTURE.md, held by the imports each package makes."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "cluster_manager"
# Of this project, what each layer may import (itself always); "*" means any module.
ALLOWED_OWN = {
    "core": {"core", "errors"},
    "sandbox": {"sandbox", "core"},
    "harness": {"harness", "sandbox", "telemetry", "core"},
    "telemetry": {"telemetry", "core"},
    "storage": {"storage", "core", "errors", "data"},
    "launchers": {"launchers", "core", "errors", "gpus", "modal_app"},
    # The application layer: never a front end (cli, discord) nor the app that wires them.
    "service": {"service", "core", "errors", "gpus", "launchers", "storage", "quick_run"},
    "data": {"data"},
}
# What runs on a GPU machine imports, beyond the standard library, only these (torch is
# imported by the task's code and the harness's workers, never at module level here).
RUNNER_THIRD_PARTY = {"cryptography", "torch", "numpy"}
# The task's and the submission's own modules, which the built-in harness imports by name.
TASK_MODULES = {"reference", "submission"}
CORE_THIRD_PARTY = {"yaml", "cryptography"}


def _imports(path: Path) -> set[str]:
    """Top-level names of every module the file imports (absolute imports only)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def _own_layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "cluster_manager" and len(parts) > 1 else None


def _third_party(module: str) -> str | None:
    top = module.split(".")[0]
    if top in sys.stdlib_module_names or top in {"cluster_manager", "__future__", *TASK_MODULES}:
        return None
    return top


def _files(layer: str) -> list[Path]:
    return sorted((PACKAGE / layer).rglob("*.py"))


@pytest.mark.parametrize("layer", sorted(ALLOWED_OWN))
def test_each_layer_imports_only_the_layers_below_it(layer: str):
    wrong = [
        f"{path.relative_to(PACKAGE)} imports {module}"
        for path in _files(layer)
        for module in _imports(path)
        if (own := _own_layer(module)) is not None and own not in ALLOWED_OWN[layer]
    ]
    assert wrong == []


@pytest.mark.parametrize(
    ("layer", "allowed"),
    [
        ("core", CORE_THIRD_PARTY),
        ("sandbox", set()),
        ("harness", RUNNER_THIRD_PARTY),
        # The vendors' management libraries, imported only when their probe opens.
        ("telemetry", {"pynvml", "amdsmi"}),
    ],
)
def test_what_runs_on_a_gpu_machine_needs_none_of_the_bots_dependencies(layer, allowed):
    foreign = [
        f"{path.relative_to(PACKAGE)} imports {module}"
        for path in _files(layer)
        for module in _imports(path)
        if (top := _third_party(module)) is not None and top not in allowed
    ]
    assert foreign == []


# A module does one job and a function one step; these bounds keep them readable. The
# scheduler's one class drives a job's whole lifecycle, a little over the module bound.
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
