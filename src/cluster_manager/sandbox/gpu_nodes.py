"""The GPU device nodes a sandbox shows: every one, or only those of the runner's own GPUs.

A machine with several GPUs runs one runner per GPU (harness.devices). The visible-devices
variables only ask the CUDA and ROCm runtimes to keep to those GPUs; a submission that resets
them would open its neighbours'. So when the runner is pinned, the sandbox leaves out the
other GPUs' nodes, as container runtimes do: NVIDIA's `/dev/nvidia<minor>` and AMD's
`/dev/dri/renderD<minor>` (and `card<n>`) of the GPUs not given. Only an explicit assignment
(CLUSTER_MANAGER_DEVICES, in the machine's numbering) narrows them: the indices Slurm sets in
CUDA_VISIBLE_DEVICES count the GPUs its cgroup left, which already hides the others. The
shared nodes stay (`nvidiactl`, `nvidia-uvm`, `/dev/kfd`): the runtimes need them, and they
open no GPU alone.

Which node is which GPU comes from the drivers: `/proc/driver/nvidia/gpus/<pci>/information`
(device minor and UUID; indices count in PCI order, as CUDA_DEVICE_ORDER=PCI_BUS_ID and
nvidia-smi do) and ROCm's KFD topology (`drm_render_minor` of each GPU node, in the order HIP
counts them). Where a pinned runner's devices cannot be matched, every node stays and the note
says why: the run still works, and its result says the sandbox did not narrow the GPUs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

PATTERNS = (("", "nvidia*"), ("", "kfd"), ("dri", "*"))
_NVIDIA_GPU_NODE = re.compile(r"^nvidia(\d+)$")


@dataclass(frozen=True)
class Roots:
    """Where the nodes and the drivers' own accounts of them are (tests point these elsewhere)."""

    dev: Path = Path("/dev")
    nvidia: Path = Path("/proc/driver/nvidia/gpus")
    kfd: Path = Path("/sys/class/kfd/kfd/topology/nodes")
    drm: Path = Path("/sys/class/drm")


@dataclass(frozen=True)
class GpuNodes:
    nodes: tuple[Path, ...]  # on the host, under `dev`
    hidden: tuple[Path, ...] = ()  # nodes of other GPUs, left out
    note: str = ""  # why the nodes were not narrowed to a pinned runner's GPUs
    dev: Path = Path("/dev")

    def binds(self) -> tuple[tuple[str, str], ...]:
        """(path in the sandbox, host node) of each node shown: at its place under /dev."""
        return tuple((f"/dev/{node.relative_to(self.dev)}", str(node)) for node in self.nodes)

    def describe(self) -> str:
        if self.note:
            return f"all ({self.note})"
        return "own only" if self.hidden else "all"


def all_nodes(roots: Roots) -> list[Path]:
    found: list[Path] = []
    for directory, pattern in PATTERNS:
        found.extend(sorted((roots.dev / directory).glob(pattern)))
    return found


def gpu_nodes(devices: Sequence[str] | None, roots: Roots | None = None) -> GpuNodes:
    """The nodes for a runner given `devices` (indices or UUIDs; None: not pinned)."""
    roots = roots or Roots()
    nodes = all_nodes(roots)
    if devices is None:
        return GpuNodes(tuple(nodes), dev=roots.dev)
    wanted = [d.strip() for d in devices if d.strip()]
    nvidia = [n for n in nodes if _NVIDIA_GPU_NODE.match(n.name)]
    if nvidia:  # the ids name NVIDIA GPUs where its driver is loaded (an AMD APU beside stays)
        minors = _pick(wanted, _nvidia_minors(roots.nvidia))
        if minors is None:
            return _unmatched(
                nodes, roots, f"NVIDIA GPU {','.join(wanted)} is not in {roots.nvidia}"
            )
        hidden = {n for n in nvidia if n.name not in {f"nvidia{m}" for m in minors}}
    elif amd := _render_minors(roots.kfd):  # render nodes of other drivers (a BMC's) stay
        minors = _pick(wanted, amd)
        if minors is None:
            return _unmatched(nodes, roots, f"AMD GPU {','.join(wanted)} is not in {roots.kfd}")
        others = {roots.dev / "dri" / f"renderD{m}" for _, m in amd if m not in minors}
        hidden = others | _cards_of(others, roots)
    else:
        hidden = set()
    kept = tuple(n for n in nodes if n not in hidden)
    return GpuNodes(kept, tuple(sorted(hidden)), dev=roots.dev)


def _unmatched(nodes: list[Path], roots: Roots, note: str) -> GpuNodes:
    return GpuNodes(tuple(nodes), note=note, dev=roots.dev)


def _pick(wanted: Sequence[str], gpus: list[tuple[str, int]]) -> list[int] | None:
    """The minors of the wanted GPUs (an index in `gpus`' order, or a UUID or its prefix, as
    the runtimes take them); None when one of them is not there."""
    minors: list[int] = []
    for want in wanted:
        if want.isdigit():
            if int(want) >= len(gpus):
                return None
            minors.append(gpus[int(want)][1])
            continue
        matches = [minor for uuid, minor in gpus if uuid and uuid.lower().startswith(want.lower())]
        if len(matches) != 1:
            return None
        minors.append(matches[0])
    return minors


def _nvidia_minors(root: Path) -> list[tuple[str, int]]:
    """(UUID, device minor) per NVIDIA GPU, in PCI order."""
    gpus = []
    for gpu in sorted(root.glob("*"), key=lambda p: p.name.lower()):
        fields = _fields(gpu / "information", ":")
        if fields.get("Device Minor", "").isdigit():
            gpus.append((fields.get("GPU UUID", ""), int(fields["Device Minor"])))
    return gpus


def _render_minors(root: Path) -> list[tuple[str, int]]:
    """(UUID, render minor) per AMD GPU, in KFD's node order (CPU nodes have no GPU id)."""
    gpus = []
    numbered = [p for p in root.glob("*") if p.name.isdigit()]
    for node in sorted(numbered, key=lambda p: int(p.name)):
        try:
            gpu_id = (node / "gpu_id").read_text().strip()
        except OSError:
            continue
        fields = _fields(node / "properties", " ")
        minor = fields.get("drm_render_minor", "")
        if gpu_id not in ("", "0") and minor.isdigit() and int(minor) > 0:
            unique = fields.get("unique_id", "")
            uuid = f"GPU-{int(unique):016x}" if unique.isdigit() else ""  # as ROCm names it
            gpus.append((uuid, int(minor)))
    return gpus


def _cards_of(renders: set[Path], roots: Roots) -> set[Path]:
    """The `card` nodes of the same devices as these render nodes (by their sysfs device)."""
    devices = {_sysfs_device(roots, r.name) for r in renders} - {None}
    cards = (roots.dev / "dri").glob("card*")
    return {c for c in cards if _sysfs_device(roots, c.name) in devices}


def _sysfs_device(roots: Roots, name: str) -> Path | None:
    try:
        return (roots.drm / name / "device").resolve(strict=True)
    except OSError:
        return None


def _fields(path: Path, separator: str) -> dict[str, str]:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return {}
    pairs = (line.split(separator, 1) for line in lines if separator in line)
    return {key.strip(): value.strip() for key, value in pairs}
