"""pyproject.toml's extras are the only place dependencies are declared; requirements/*.lock are
made from them (`make lock`). These tests fail when the two drift apart, and when code imports
a package that no declared dependency brings. Offline: they read files and this environment's
installed metadata only."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
LOCKS = ROOT / "requirements"
PROJECT = "cluster-manager"
# Each lock: the extras it is made from (with the base dependencies) and what it leaves out.
# The Makefile's `lock` target makes each of them; a new lock needs a line here.
TARGETS: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {
    "dev.lock": (("dev",), frozenset()),
    "bot.lock": (("bot",), frozenset()),
    "runner-cpu.lock": (("runner",), frozenset()),
    "runner-cuda.lock": (("runner",), frozenset()),
    # An AMD machine's ROCm brings torch and numpy.
    "runner-rocm.lock": (("runner",), frozenset({"torch", "numpy"})),
}
# Where torch must be the CPU build: `make setup` and the runner without an NVIDIA driver.
# A CUDA build brings gigabytes of these (nvidia-ml-py is only NVML's binding).
CPU_ONLY = ("dev.lock", "runner-cpu.lock")
CUDA_PACKAGES = re.compile(r"^(nvidia-(?!ml-py$)|cuda-|triton$)")
# Imported, but not from a distribution: the task's and the submission's own modules (the
# harness imports them by name in the run directory), and AMD's amdsmi, which comes with ROCm.
NOT_DISTRIBUTIONS = {"reference", "submission", "amdsmi"}
# Whose imports are checked against which extras (task folders are data, not code).
IMPORTERS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "src/cluster_manager": (("bot", "runner"), ("data/examples",)),
    "tests": (("dev",), ("fixtures",)),
    "benchmarks": (("dev",), ()),
}


@dataclass
class Pin:
    name: str
    version: str
    extras: set[str]
    hashes: list[str]
    via: list[str] = field(default_factory=list)


def _logical_lines(text: str) -> Iterator[str]:
    pending = ""
    for raw in text.splitlines():
        line = f"{pending} {raw.strip()}".strip() if pending else raw.strip()
        if line.endswith("\\"):
            pending = line[:-1].strip()
            continue
        pending = ""
        if line:
            yield line


@cache
def read_lock(name: str) -> dict[str, Pin]:
    pins: dict[str, Pin] = {}
    last: Pin | None = None
    for line in _logical_lines((LOCKS / name).read_text(encoding="utf-8")):
        if line.startswith("#"):
            if last is not None:
                note = line.lstrip("#").strip().removeprefix("via").strip()
                last.via.extend([note] if note else [])
            continue
        assert not line.startswith("-"), f"{name}: an option line in a lock: {line}"
        requirement = Requirement(line.split(" --hash=")[0])
        specs = list(requirement.specifier)
        assert len(specs) == 1 and specs[0].operator == "==", f"{name}: not pinned: {line}"
        last = Pin(
            canonicalize_name(requirement.name),
            specs[0].version,
            set(requirement.extras),
            re.findall(r"--hash=(\S+)", line),
        )
        pins[last.name] = last
    return pins


@cache
def _pyproject() -> dict[str, list[Requirement]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = {"": [Requirement(text) for text in project["dependencies"]]}
    for extra, texts in project["optional-dependencies"].items():
        declared[extra] = [Requirement(text) for text in texts]
    return declared


def declared(extras: tuple[str, ...]) -> dict[str, Requirement]:
    """The base dependencies and those of `extras`, the project's own extras that they name
    (`cluster-manager[bot,runner]`) followed; by normalized name."""
    found: dict[str, Requirement] = {}
    pending, seen = ["", *extras], set()
    while pending:
        extra = pending.pop()
        if extra in seen:
            continue
        seen.add(extra)
        assert extra in _pyproject(), f"pyproject.toml has no extra {extra!r}"
        for requirement in _pyproject()[extra]:
            if canonicalize_name(requirement.name) == PROJECT:
                pending.extend(requirement.extras)
            else:
                found[canonicalize_name(requirement.name)] = requirement
    return found


def test_every_lock_is_made_by_make_lock_and_checked_here():
    on_disk = {path.name for path in LOCKS.glob("*.lock")}
    assert on_disk == set(TARGETS), "a lock without a line in TARGETS, or a line without a lock"
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for name, (extras, _) in TARGETS.items():
        recipe = [line for line in makefile.splitlines() if f"-o requirements/{name}" in line]
        assert len(recipe) == 1, f"the Makefile's `lock` target does not make {name}"
        assert all(f"--extra {extra}" in recipe[0] for extra in extras), recipe[0]


@pytest.mark.parametrize("lock", sorted(TARGETS))
def test_the_lock_pins_every_declared_requirement_with_its_hashes(lock: str):
    extras, left_out = TARGETS[lock]
    pins = read_lock(lock)
    wanted = {name: req for name, req in declared(extras).items() if name not in left_out}
    stale = []
    for name, requirement in wanted.items():
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        if name not in pins:
            stale.append(f"{requirement} is not in it")
        elif not requirement.specifier.contains(pins[name].version, prereleases=True):
            stale.append(f"{requirement} but it pins {pins[name].version}")
        elif not requirement.extras <= pins[name].extras:
            stale.append(f"{requirement} but it has {name}[{','.join(pins[name].extras)}]")
    # What it says came straight from pyproject.toml must still be declared there.
    direct = {pin.name for pin in pins.values() if f"{PROJECT} (pyproject.toml)" in pin.via}
    stale += [f"{name}: pyproject.toml no longer asks for it" for name in direct - set(wanted)]
    stale += [f"{name}: left out, yet in it" for name in left_out & set(pins)]
    assert not stale, f"requirements/{lock} is stale (run `make lock`): " + "; ".join(stale)
    unhashed = [pin.name for pin in pins.values() if not pin.hashes]
    assert not unhashed, f"requirements/{lock}: pins without --hash: {unhashed}"


@pytest.mark.parametrize("lock", CPU_ONLY)
def test_torch_is_the_cpu_build_where_setup_and_ci_install_it(lock: str):
    cuda = sorted(name for name in read_lock(lock) if CUDA_PACKAGES.match(name))
    assert "torch" in read_lock(lock)
    assert not cuda, f"requirements/{lock} holds a CUDA build of torch: {cuda}"


def test_the_locks_the_workflows_and_the_makefile_name_exist():
    users = [ROOT / "Makefile", *sorted((ROOT / ".github" / "workflows").glob("*.yml"))]
    for path in users:
        for name in re.findall(r"requirements/([\w.-]+\.lock)", path.read_text(encoding="utf-8")):
            assert (LOCKS / name).is_file(), f"{path.relative_to(ROOT)} names requirements/{name}"


def _imports(folder: Path, skipped: tuple[str, ...]) -> Iterator[tuple[str, Path]]:
    """The top-level names of the absolute imports of every module under `folder`."""
    for path in sorted(folder.rglob("*.py")):
        relative = path.relative_to(folder).as_posix()
        if any(relative.startswith(f"{skip}/") for skip in skipped):
            continue
        for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
            if isinstance(node, ast.Import):
                yield from ((alias.name.split(".")[0], path) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                yield node.module.split(".")[0], path


def _is_local(name: str, folder: Path) -> bool:
    """This project's own package, or a module beside the importer's (benchmarks' helpers)."""
    return name in {"cluster_manager", "tests"} or any(
        (folder / f"{name}{suffix}").exists() for suffix in (".py", "/__init__.py")
    )


@pytest.mark.parametrize("folder", sorted(IMPORTERS))
def test_every_third_party_import_comes_from_a_declared_dependency(folder: str):
    extras, skipped = IMPORTERS[folder]
    allowed = set(declared(extras))
    providers = packages_distributions()
    missing: dict[str, set[str]] = {}
    for name, path in _imports(ROOT / folder, skipped):
        if name in sys.stdlib_module_names or name in NOT_DISTRIBUTIONS:
            continue
        if _is_local(name, ROOT / folder) or _is_local(name, path.parent):
            continue
        dists = {canonicalize_name(dist) for dist in providers.get(name, [])}
        if not dists & allowed:
            where = sorted(dists) or ["no installed distribution"]
            missing.setdefault(f"{name} ({', '.join(where)})", set()).add(
                path.relative_to(ROOT).as_posix()
            )
    assert not missing, (
        f"imported under {folder} but not declared in pyproject.toml's {list(extras)} "
        "(declare it, then `make lock`): "
        + "; ".join(f"{name} in {sorted(paths)[:3]}" for name, paths in sorted(missing.items()))
    )


def test_the_modal_image_installs_the_runners_pins():
    """The Modal image pins torch, numpy and NVML in code (its torch from PyTorch's CUDA
    index): the same versions as the GPU runners' lock."""
    source = (ROOT / "src" / "cluster_manager" / "runners" / "modal_app.py").read_text()
    image = dict(re.findall(r'"([a-z0-9-]+)==([^"]+)"', source))
    lock = (ROOT / "requirements" / "runner-cuda.lock").read_text()
    locked = dict(re.findall(r"^([a-z0-9-]+)==(\S+)", lock, re.MULTILINE))
    assert set(image) == {"torch", "numpy", "nvidia-ml-py"}
    assert {name: locked.get(name) for name in image} == image
