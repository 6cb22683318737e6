"""The runner machine's Python environment, built once per content and reused by later jobs.

A self-hosted runner keeps its disk between jobs, so the environment that runs the entrypoint
(torch and the runner's other requirements) is built once per hash of what it installs and of
the interpreter, under `${RUNNER_TOOL_CACHE:-$HOME/.cache}/cluster-manager/venvs/<hash>`. It is
built under a lock in a temporary directory and renamed into place: a job sees either no
environment or a whole one, whether another job builds it at the same time or a job was
killed halfway. This package itself is not installed there; each job runs it from its own
checkout (PYTHONPATH), so a new commit never rebuilds the environment.

Every job marks the environment it uses; environments no job used for `--keep-days` (or
$CLUSTER_MANAGER_VENV_KEEP_DAYS, 14 by default) are removed, so a machine whose requirements
changed does not keep every torch it ever installed. A job that uses one marks it under a
shared lock, which removal cannot take.

Runs before anything is installed: the standard library only.

    python3 -m cluster_manager.runners.venv --requirements requirements/runner-cuda.lock
    # prints the environment's directory; `<dir>/bin/python` runs the entrypoint
"""

from __future__ import annotations

import argparse
import contextlib
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
KEEP_DAYS_ENV = "CLUSTER_MANAGER_VENV_KEEP_DAYS"  # in the runner's .env, as the workflows pass none
# Bumped when the way environments are built changes: older ones are then left unused.
LAYOUT = "1"
COMPLETE_MARKER = ".complete"
LAST_USED_MARKER = ".last-used"  # its mtime: when a job last used the environment
BUILDING_PREFIX = ".building-"
REMOVING_PREFIX = ".removing-"
KEEP_DAYS = 14.0
_ENV_NAME = re.compile(r"^[0-9a-f]{16}$")  # what `EnvSpec.digest` names; nothing else is removed
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


def ensure(
    spec: EnvSpec,
    root: Path | None = None,
    *,
    keep_days: float = KEEP_DAYS,
    log: Callable[[str], None] = print,
) -> Path:
    """The environment's directory, built first if no job on this machine built it yet;
    then the environments no job used for `keep_days` are removed."""
    root = root or default_root()
    final = root / spec.digest()
    root.mkdir(parents=True, exist_ok=True)
    if _mark_used(final):
        log(f"runner environment {final} reused")
    else:
        _build_once(spec, final, log)
    for removed in prune(root, keep_days=keep_days, keep=final.name):
        log(f"runner environment {removed} removed: no job used it for {keep_days:g} days")
    return final


def _build_once(spec: EnvSpec, final: Path, log: Callable[[str], None]) -> None:
    root = final.parent
    with _locked(_lock_path(final)):
        if _is_complete(final):  # another job built it while this one waited
            (final / LAST_USED_MARKER).touch()
            log(f"runner environment {final} reused (built by another job)")
            return
        _remove_leftovers(root, final.name)
        started = time.monotonic()
        log(f"runner environment {final}: building (once per machine and requirements)")
        building = Path(tempfile.mkdtemp(prefix=f"{BUILDING_PREFIX}{final.name}-", dir=root))
        try:
            building.chmod(0o755)  # mkdtemp's 0700 would hide it from the sandbox's user
            _build(building, spec)
            _relocate(building, final)
            (building / LAST_USED_MARKER).touch()
            (building / COMPLETE_MARKER).write_text(f"{time.time():.0f}\n", encoding="utf-8")
            building.rename(final)
        except BaseException:
            shutil.rmtree(building, ignore_errors=True)
            raise
        log(f"runner environment {final} built in {time.monotonic() - started:.1f} s")


def _mark_used(final: Path) -> bool:
    """Whether the environment is there whole; if so it is marked as used now, under a shared
    lock so that no removal can be halfway through it meanwhile."""
    if not _is_complete(final):
        return False
    with _locked(_lock_path(final), shared=True):
        if not _is_complete(final):  # removed between the look and the lock
            return False
        (final / LAST_USED_MARKER).touch()
        return True


def prune(root: Path, *, keep_days: float = KEEP_DAYS, keep: str = "") -> list[Path]:
    """Removes the environments under `root` that no job used for `keep_days` (but `keep`),
    each under its lock taken without waiting: one in use or being built stays. Returns the
    removed ones. One job prunes at a time; the others go on without waiting."""
    cutoff = time.time() - keep_days * 86400
    removed: list[Path] = []
    with _try_locked(root / ".prune.lock") as pruning:
        if not pruning:
            return removed
        for leftover in root.glob(f"{REMOVING_PREFIX}*"):  # of a pruning job that was killed
            shutil.rmtree(leftover, ignore_errors=True)
        for env in sorted(root.iterdir()):
            if env.name == keep or not _ENV_NAME.match(env.name) or not env.is_dir():
                continue
            if _last_used(env) < cutoff and _remove_unused(env, cutoff):
                removed.append(env)
    return removed


def _remove_unused(env: Path, cutoff: float) -> bool:
    with _try_locked(_lock_path(env)) as locked:
        # Under the lock, looked at again: a job may have marked it since.
        if not locked or _last_used(env) >= cutoff:
            return False
        trash = Path(tempfile.mkdtemp(prefix=f"{REMOVING_PREFIX}{env.name}-", dir=env.parent))
        env.rename(trash / env.name)  # at once: the environment is gone for every later job
    shutil.rmtree(trash, ignore_errors=True)
    return True


def _last_used(env: Path) -> float:
    for marker in (env / LAST_USED_MARKER, env / COMPLETE_MARKER, env):
        with contextlib.suppress(OSError):
            return marker.stat().st_mtime
    return time.time()


def _lock_path(env: Path) -> Path:
    return env.parent / f"{env.name}.lock"


def _is_complete(path: Path) -> bool:
    return (path / COMPLETE_MARKER).is_file() and (path / "bin" / "python").exists()


@contextmanager
def _locked(path: Path, *, shared: bool = False) -> Iterator[None]:
    """A lock the kernel releases when its holder dies, however it dies."""
    with path.open("a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def _try_locked(path: Path) -> Iterator[bool]:
    """An exclusive lock if nobody holds it: yields whether it was taken."""
    with path.open("a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
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
    parser.add_argument(
        "--keep-days",
        type=float,
        default=os.environ.get(KEEP_DAYS_ENV, str(KEEP_DAYS)),
        help=f"remove the environments no job used for this many days (default: ${KEEP_DAYS_ENV} "
        f"or {KEEP_DAYS:g})",
    )
    args = parser.parse_args(argv)
    if args.keep_days < 0:
        parser.error(f"--keep-days (or ${KEEP_DAYS_ENV}) must be 0 or more, not {args.keep_days:g}")
    spec = EnvSpec.from_file(args.requirements, system_packages=args.system_package)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    print(ensure(spec, args.root, keep_days=args.keep_days, log=log))
    return 0


if __name__ == "__main__":
    sys.exit(main())
