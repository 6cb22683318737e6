"""A machine Python with torch in its own site-packages, as on a ROCm machine (torch is
installed system-wide there, not from PyPI): Debian's python3.11 placed in a prefix of its own
(its standard library and torch hard-linked in, no copies), so the AMD workflow's
`--system-site-packages` environment finds torch the way it would on such a machine."""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import tempfile
from importlib import metadata
from pathlib import Path

MACHINE_PYTHON = Path("/usr/bin/python3.11")
STDLIB = Path("/usr/lib/python3.11")
# Debian's `pip install` as root puts packages here (site.getsitepackages()[0]).
SITE = "local/lib/python3.11/dist-packages"


def machine_python_with_torch(prefix: Path) -> Path:
    """Builds the prefix (once, whichever test process comes first) and returns its bin
    directory, to put first on PATH."""
    prefix.parent.mkdir(parents=True, exist_ok=True)
    with open(prefix.parent / f"{prefix.name}.lock", "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (prefix / "bin" / "python3").exists():
            shutil.rmtree(prefix, ignore_errors=True)
            building = Path(tempfile.mkdtemp(prefix=f"{prefix.name}-", dir=prefix.parent))
            _build(building)
            building.chmod(0o755)
            building.rename(prefix)
    return prefix / "bin"


def _build(prefix: Path) -> None:
    _link_tree(STDLIB, prefix / "lib" / "python3.11")
    site = prefix / SITE
    site.mkdir(parents=True)
    for top in sorted(_top_levels(_closure("torch") | {"numpy"})):
        _link_tree(top, site / top.name)
    (prefix / "bin").mkdir()
    _link_or_copy(MACHINE_PYTHON, prefix / "bin" / "python3")


def _closure(name: str) -> set[str]:
    """The distribution and everything it requires, as installed here."""
    seen: set[str] = set()
    pending = [name]
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        for requirement in metadata.requires(current) or []:
            if "extra ==" in requirement:
                continue
            match = re.match(r"[A-Za-z0-9._-]+", requirement)
            if match:
                pending.append(match.group(0))
    return seen


def _top_levels(names: set[str]) -> set[Path]:
    """The folders and modules those distributions installed, with their metadata."""
    tops: set[Path] = set()
    for name in names:
        dist = metadata.distribution(name)
        for file in dist.files or []:
            if file.parts[0] != ".." and not file.parts[0].endswith(".pth"):
                tops.add(Path(str(dist.locate_file(file.parts[0]))))
    return {top for top in tops if top.exists() and top.name != "__pycache__"}


def _link_tree(source: Path, target: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, target, copy_function=_link_or_copy, symlinks=True)
    else:
        _link_or_copy(source, target)


def _link_or_copy(source: str | Path, target: str | Path) -> None:
    """A hard link (instant, no space), or a copy across file systems."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
