"""What the full sandbox shows of the host: the `View` bubblewrap binds for one run, and the
sandbox's own /etc and /proc files the runner writes into the run directory for it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import site
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from cluster_manager.sandbox.gpu_nodes import GpuNodes
from cluster_manager.sandbox.spec import (
    ETC_FILES,
    KERNEL_VIEWS,
    PROC_FILES,
    SYSTEM_DIRS,
    View,
)

ETC_DIR = ".etc"  # the sandbox's own files of /etc, written by the runner
ETC_WRITTEN = ("passwd", "group", "hosts")
PROC_DIR = ".proc"  # the sandbox's own /proc/cmdline and /proc/meminfo


def full_view(
    workdir: Path,
    nodes: GpuNodes,
    scratch: tuple[str, ...],
    tools: Sequence[str] = (),
    private_bytes: int = 1 << 30,
) -> View:
    """The run directory, the toolchain, the interpreter and `tools` read-only; `scratch` (the
    run's HOME and TMPDIR) an empty tmpfs each; the GPUs' nodes; the written /etc and /proc."""
    read_only: set[str] = {str(workdir), *(t for t in tools if Path(t).is_dir())}
    symlinks: list[tuple[str, str]] = []
    for path in SYSTEM_DIRS:
        host = Path(path)
        if host.is_symlink():
            symlinks.append((path, str(host.readlink())))
        elif host.is_dir():
            read_only.add(path)
    read_only.update(p for p in ETC_FILES if Path(p).exists())
    root = Path("/")
    kernel = sorted(str(p) for pattern in KERNEL_VIEWS for p in root.glob(pattern.lstrip("/")))
    read_only.update(kernel)
    read_only.update(interpreter_paths())
    files = tuple((f"/etc/{name}", str(workdir / ETC_DIR / name)) for name in ETC_WRITTEN)
    files += tuple((path, str(workdir / PROC_DIR / Path(path).name)) for path in PROC_FILES)
    return View(
        read_only=outermost(read_only),
        masked=_network_interfaces(kernel),
        scratch=scratch,
        devices=nodes.binds(),
        symlinks=tuple(symlinks),
        files=files,
        private_bytes=private_bytes,
    )


def _etc_files(identity: tuple[int, int, bool] | None) -> dict[str, str]:
    """passwd and group naming the sandbox's user, hosts naming only loopback."""
    uid, gid = (identity[0], identity[1]) if identity else (os.geteuid(), os.getegid())
    return {
        "passwd": f"root:x:0:0::/:/usr/sbin/nologin\nsandbox:x:{uid}:{gid}::/:/usr/sbin/nologin\n",
        "group": f"root:x:0:\nsandbox:x:{gid}:\n",
        "hosts": "127.0.0.1 localhost sandbox\n::1 localhost\n",
    }


def write_etc(workdir: Path, identity: tuple[int, int, bool] | None) -> None:
    etc = workdir / ETC_DIR
    etc.mkdir(mode=0o755, exist_ok=True)
    for name, text in _etc_files(identity).items():
        (etc / name).write_text(text, encoding="utf-8")


def _proc_files() -> dict[str, str]:
    """An empty boot command line, and a meminfo that shows all memory free and no swap:
    the host's own tell its configuration and, moment by moment, what other runs use."""
    total_kb = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 1024
    fields = {"MemTotal": total_kb, "MemFree": total_kb, "MemAvailable": total_kb}
    fields |= dict.fromkeys(("Buffers", "Cached", "SwapCached", "SwapTotal", "SwapFree"), 0)
    fields["Shmem"] = 0
    meminfo = "".join(f"{name + ':':<16}{value:>8} kB\n" for name, value in fields.items())
    return {"cmdline": "\n", "meminfo": meminfo}


def write_proc(workdir: Path) -> None:
    directory = workdir / PROC_DIR
    directory.mkdir(mode=0o755, exist_ok=True)
    for name, text in _proc_files().items():
        (directory / name).write_text(text, encoding="utf-8")


def _network_interfaces(bound: Sequence[str]) -> tuple[str, ...]:
    """The `net` directories of the host's network interfaces inside what is bound of /sys (a
    network card's PCI device): hidden, so its interface names and addresses are too."""
    found: set[str] = set()
    with contextlib.suppress(OSError):
        for link in Path("/sys/class/net").iterdir():
            directory = str(link.resolve().parent)
            if any(under(directory, b) for b in bound):
                found.add(directory)
    return tuple(sorted(found))


def interpreter_paths() -> list[str]:
    """The interpreter, its packages, torch, CUDA and this package: what the tree must import."""
    paths = [sys.base_prefix, sys.prefix, sys.exec_prefix, *site.getsitepackages()]
    paths.append(str(Path(__file__).resolve().parents[2]))  # the tree holding cluster_manager
    torch = importlib.util.find_spec("torch")
    if torch is not None and torch.submodule_search_locations:
        paths.extend(str(Path(p).parent) for p in torch.submodule_search_locations)
    paths.extend(os.environ[k] for k in ("CUDA_HOME", "CUDA_PATH") if k in os.environ)
    return sorted({str(Path(p).resolve()) for p in paths if Path(p).exists()})


def under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def outermost(paths: Iterable[str]) -> tuple[str, ...]:
    """Only the paths no other one contains: a bind of those shows the rest."""
    kept: list[str] = []
    for path in sorted(paths):
        if not any(under(path, k) for k in kept):
            kept.append(path)
    return tuple(kept)
