"""A machine's GPU device nodes and the drivers' accounts of them, as plain files: three NVIDIA
GPUs whose device minors are not their PCI order and/or two AMD GPUs behind KFD, beside a
board's display adapter that is neither's."""

from __future__ import annotations

import os
from pathlib import Path

from cluster_manager.sandbox.gpu_nodes import Roots

# PCI address -> (device minor, UUID); PCI order gives the indices 0, 1, 2.
NVIDIA = {
    "0000:1a:00.0": (2, "GPU-aaaa1111-0000-0000-0000-000000000000"),
    "0000:3b:00.0": (0, "GPU-bbbb2222-0000-0000-0000-000000000000"),
    "0000:88:00.0": (1, "GPU-cccc3333-0000-0000-0000-000000000000"),
}
# KFD node -> (gpu_id, render minor, card); node 0 is the CPU.
AMD = {0: (0, 0, None), 1: (41251, 128, "card1"), 2: (52312, 129, "card2")}
DISPLAY = ("renderD130", "card0")  # a BMC's display adapter: not a GPU the runtimes use
NVIDIA_SHARED = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")

# Run as a wrapper of the runner entrypoint (`python -c WRAPPER --payload ...`): the sandbox
# then reads the fake machine named by CM_TEST_FAKE_GPUS instead of this one's /dev.
WRAPPER = """
import functools, os, runpy, sys
from pathlib import Path
from cluster_manager.sandbox import gpu_nodes
fake = Path(os.environ["CM_TEST_FAKE_GPUS"])
gpu_nodes.Roots = functools.partial(
    gpu_nodes.Roots, dev=fake / "dev", nvidia=fake / "nvidia", kfd=fake / "kfd", drm=fake / "drm"
)
sys.argv = ["cluster_manager.harness.runner", *sys.argv[1:]]
runpy.run_module("cluster_manager.harness.runner", run_name="__main__")
"""


def build(root: Path, *, nvidia: bool = True, amd: bool = True) -> Roots:
    roots = Roots(dev=root / "dev", nvidia=root / "nvidia", kfd=root / "kfd", drm=root / "drm")
    (roots.dev / "dri").mkdir(parents=True)
    if nvidia:
        _nvidia(roots)
    if amd:
        _amd(roots)
    _drm_pair(roots, *DISPLAY, "0000:02:00.0")
    for path in [root, *root.rglob("*")]:  # readable by a plain user and the sandbox's
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return roots


def _nvidia(roots: Roots) -> None:
    (roots.dev / "nvidia-caps").mkdir()
    for name in NVIDIA_SHARED:
        _node(roots.dev / name)
    for pci, (minor, uuid) in NVIDIA.items():
        _node(roots.dev / f"nvidia{minor}")
        info = roots.nvidia / pci / "information"
        info.parent.mkdir(parents=True)
        info.write_text(f"Model: \t\t NVIDIA H100\nDevice Minor: \t {minor}\nGPU UUID: \t {uuid}\n")


def _amd(roots: Roots) -> None:
    _node(roots.dev / "kfd")
    for node, (gpu_id, render, card) in AMD.items():
        directory = roots.kfd / str(node)
        directory.mkdir(parents=True)
        (directory / "gpu_id").write_text(f"{gpu_id}\n")
        props = f"cpu_cores_count 0\ndrm_render_minor {render}\nunique_id {9000 + node}\n"
        (directory / "properties").write_text(props)
        if card is not None:
            _drm_pair(roots, f"renderD{render}", card, f"0000:c{node}:00.0")


def _node(path: Path) -> None:
    path.write_text(f"device {path.name}\n")


def _drm_pair(roots: Roots, render: str, card: str, pci: str) -> None:
    device = roots.drm.parent / "devices" / pci
    device.mkdir(parents=True)
    for name in (render, card):
        _node(roots.dev / "dri" / name)
        (roots.drm / name).mkdir(parents=True)
        (roots.drm / name / "device").symlink_to(device)
