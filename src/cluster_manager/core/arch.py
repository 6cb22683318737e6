"""The compiler target of a GPU type (`arch:` in the registry) and what it means for a build.

NVIDIA targets are `sm_XY` with an optional `a` (arch-specific features, e.g. wgmma on sm_90a)
or `f` (family) suffix; AMD targets are LLVM's `gfxNNN` names. A CUDA task is compiled for the
type's exact target unless its own `compile_flags` already choose one: the task's author may
need several targets or a PTX-only build, and two target flags would fight.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

NVIDIA_ARCH = re.compile(r"sm_(\d{2,3})([af]?)")
AMD_ARCH = re.compile(r"gfx[0-9a-f]{3,4}")
# Flags of nvcc and hipcc (clang) that choose the target themselves.
_TARGET_FLAGS = (
    "-arch",
    "--gpu-architecture",
    "-gencode",
    "--generate-code",
    "-code",
    "--gpu-code",
    "--offload-arch",
    "--cuda-gpu-arch",
    "--amdgpu-target",
)


def valid_arch(arch: str) -> bool:
    return bool(NVIDIA_ARCH.fullmatch(arch) or AMD_ARCH.fullmatch(arch))


def chooses_target(flags: Sequence[str]) -> bool:
    """Whether the task's own compile flags already pick a target (`-arch=sm_80`,
    `-gencode arch=...`, `--offload-arch=gfx942`, ...)."""
    return any(f == t or f.startswith((f"{t}=", f"{t} ")) for f in flags for t in _TARGET_FLAGS)


def target_flags(arch: str | None, flags: Sequence[str]) -> list[str]:
    """The compiler flag for `arch`: `-arch=sm_90a` (nvcc: SASS for the GPU plus its PTX), or
    `--offload-arch=gfx942` (hipcc); none without an arch or when the task chose its own."""
    if arch is None or chooses_target(flags):
        return []
    if NVIDIA_ARCH.fullmatch(arch):
        return [f"-arch={arch}"]
    return [f"--offload-arch={arch}"]


def torch_arch_env(arch: str | None) -> dict[str, str]:
    """What torch's extension builds (load_inline, cpp_extension) read for their target:
    TORCH_CUDA_ARCH_LIST ("9.0a" for sm_90a) or PYTORCH_ROCM_ARCH ("gfx942")."""
    if arch is None:
        return {}
    match = NVIDIA_ARCH.fullmatch(arch)
    if match is not None:
        digits, suffix = match.groups()
        return {"TORCH_CUDA_ARCH_LIST": f"{digits[:-1]}.{digits[-1]}{suffix}"}
    return {"PYTORCH_ROCM_ARCH": arch}
