"""The runner machine's Python environment, built once per content and reused by later jobs.

A self-hosted runner keeps its disk between jobs, so the environment that runs the entrypoint
(torch and the runner's other requirements) is built once per hash of what it installs and of
the interpreter, under `${RUNNER_TOOL_CACHE:-$HOME/.cache}/cluster-manager/venvs/<hash>`. It is
built under a lock in a temporary directory and renamed into place: a job sees either no
environment or a whole one, whether another job builds it at the same time or a job was
killed halfway. This package itself is not installed there; each job runs it from its own
checkout (PYTHONPATH), so a new commit never rebuilds the environment.

Runs before anything is installed: the standard library only.

    python3 -m cluster_manager.runner_venv --requirements requirements-runner.txt
    # prints the environment's directory; `<dir>/bin/python` runs the entrypoint
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT_ENV = "CLUSTER_MANAGER_VENV_ROOT"
# Bumped when the way environments are built changes: older ones are then left unused.
LAYOUT = "1"
COMPLETE_MARKER = ".complete"
BUILDING_PREFIX = ".building-"
_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


@dataclass(frozen=True)
class EnvSpec:
    """What an environment holds: its requirement lines, and whether the machine's own
    packages (a ROCm build of torch) show through."""

    requirements: tuple[str, ...]
    system_site_packages: bool = False

    @classmethod
    def from_file(cls, path: Path, *, system_packages: Sequence[str] = ()) -> EnvSpec:
        """The file's requirement lines, less those the machine provides (`system_packages`:
        the venv then sees the machine's site-packages)."""
        skipped = {_normalized(name) for name in system_packages}
        lines = []
        for raw in path.read_text(encoding="utf-8").splitlines():
            line = raw.split("#", 1)[0].strip()
            match = _REQUIREMENT_NAME.match(line)
            if line and not (match and _normalized(match.group(1)) in skipped):
                lines.append(line)
        return cls(tuple(lines), system_site_packages=bool(system_packages))

    def digest(self, python: str = sys.executable) -> str:
        """Names the environment: the same requirements on the same interpreter, same name."""
        identity = "\n".join(
            [
                LAYOUT,
                os.path.realpath(python),
                sys.version,
                platform.machine(),
                f"system-site-packages={self.system_site_packages}",
                *self.requirements,
            ]
        )
        return hashlib.sha256(identity.encode()).hexdigest()[:16]


def default_root() -> Path:
    if os.environ.get(ROOT_ENV):
        return Path(os.environ[ROOT_ENV])
    base = os.environ.get("RUNNER_TOOL_CACHE") or str(Path.home() / ".cache")
    return Path(base) / "cluster-manager" / "venvs"


def ensure(spec: EnvSpec, root: Path | None = None, *, log: Callable[[str], None] = print) -> Path:
    """The environment's directory, built first if no job on this machine built it yet."""
    root = root or default_root()
    final = root / spec.digest()
    if _is_complete(final):
        log(f"runner environment {final} reused")
        return final
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / f"{final.name}.lock"):
        if _is_complete(final):  # another job built it while this one waited
            log(f"runner environment {final} reused (built by another job)")
            return final
        _remove_leftovers(root, final.name)
        started = time.monotonic()
        log(f"runner environment {final}: building (once per machine and requirements)")
        building = Path(tempfile.mkdtemp(prefix=f"{BUILDING_PREFIX}{final.name}-", dir=root))
        try:
            building.chmod(0o755)  # mkdtemp's 0700 would hide it from the sandbox's user
            _build(building, spec)
            _relocate(building, final)
            (building / COMPLETE_MARKER).write_text(f"{time.time():.0f}\n", encoding="utf-8")
            building.rename(final)
        except BaseException:
            shutil.rmtree(building, ignore_errors=True)
            raise
        log(f"runner environment {final} built in {time.monotonic() - started:.1f} s")
        return final


def _is_complete(path: Path) -> bool:
    return (path / COMPLETE_MARKER).is_file() and (path / "bin" / "python").exists()


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock the kernel releases when its holder dies, however it dies."""
    with path.open("a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _remove_leftovers(root: Path, name: str) -> None:
    """Half-built environments of killed jobs: under the lock, nobody else is building this
    one. A directory of the final name without its marker is one of them too."""
    for stale in root.glob(f"{BUILDING_PREFIX}{name}-*"):
        shutil.rmtree(stale, ignore_errors=True)
    if (root / name).exists():
        shutil.rmtree(root / name, ignore_errors=True)


def _build(target: Path, spec: EnvSpec) -> None:
    venv = [sys.executable, "-m", "venv", str(target)]
    if spec.system_site_packages:
        venv.insert(3, "--system-site-packages")
    subprocess.run(venv, check=True, stdout=sys.stderr)
    if not spec.requirements:
        return
    requirements = target / "requirements.txt"
    requirements.write_text("\n".join(spec.requirements) + "\n", encoding="utf-8")
    pip = [str(target / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check"]
    subprocess.run([*pip, "-r", str(requirements)], check=True, stdout=sys.stderr)


def _relocate(built: Path, final: Path) -> None:
    """Points the scripts of `built` (shebangs, activate) and its pyvenv.cfg at the directory
    it is renamed to."""
    old, new = os.fsencode(str(built)), os.fsencode(str(final))
    for script in [*(built / "bin").iterdir(), built / "pyvenv.cfg"]:
        if script.is_symlink() or not script.is_file():
            continue
        content = script.read_bytes()
        if old in content and b"\0" not in content[:1024]:
            script.write_bytes(content.replace(old, new))


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requirements", type=Path, required=True)
    parser.add_argument(
        "--system-package",
        action="append",
        default=[],
        help="a package the machine provides (e.g. a ROCm torch): not installed, and the "
        "environment sees the machine's site-packages",
    )
    parser.add_argument("--root", type=Path, help=f"default: ${ROOT_ENV} or the tool cache")
    args = parser.parse_args(argv)
    spec = EnvSpec.from_file(args.requirements, system_packages=args.system_package)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    print(ensure(spec, args.root, log=log))
    return 0


if __name__ == "__main__":
    sys.exit(main())
