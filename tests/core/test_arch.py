"""The compiler target of a GPU type: the flag a CUDA build gets, and torch's build variables."""

from __future__ import annotations

import pytest

from cluster_manager.core.arch import chooses_target, target_flags, torch_arch_env, valid_arch


@pytest.mark.parametrize(
    "arch", ["sm_90a", "sm_100a", "sm_80", "sm_89", "sm_75", "gfx942", "gfx90a"]
)
def test_the_shipped_targets_are_valid(arch: str) -> None:
    assert valid_arch(arch)


@pytest.mark.parametrize("arch", ["", "sm90", "sm_9", "compute_90", "gfx", "H100", "sm_90a; rm"])
def test_anything_else_is_not_a_target(arch: str) -> None:
    assert not valid_arch(arch)


@pytest.mark.parametrize(
    ("arch", "flags"),
    [
        ("sm_90a", ["-arch=sm_90a"]),
        ("sm_100a", ["-arch=sm_100a"]),
        ("sm_80", ["-arch=sm_80"]),
        ("gfx942", ["--offload-arch=gfx942"]),
        (None, []),
    ],
)
def test_a_build_targets_the_exact_arch(arch: str | None, flags: list[str]) -> None:
    assert target_flags(arch, ["-O3", "--use_fast_math"]) == flags


@pytest.mark.parametrize(
    "task_flags",
    [
        ["-O3", "-arch=sm_80"],
        ["-arch", "sm_80"],
        ["-gencode", "arch=compute_80,code=sm_80"],
        ["-gencode=arch=compute_80,code=sm_80"],
        ["-gencode arch=compute_80,code=sm_80"],
        ["--gpu-architecture=sm_80"],
        ["--offload-arch=gfx90a"],
    ],
)
def test_a_task_that_chooses_its_own_target_keeps_it(task_flags: list[str]) -> None:
    assert chooses_target(task_flags)
    assert target_flags("sm_90a", task_flags) == []


def test_flags_that_only_look_alike_do_not_count() -> None:
    assert not chooses_target(["-O3", "-archive", "--expt-relaxed-constexpr", "-lineinfo"])


@pytest.mark.parametrize(
    ("arch", "env"),
    [
        ("sm_90a", {"TORCH_CUDA_ARCH_LIST": "9.0a"}),
        ("sm_100a", {"TORCH_CUDA_ARCH_LIST": "10.0a"}),
        ("sm_89", {"TORCH_CUDA_ARCH_LIST": "8.9"}),
        ("sm_75", {"TORCH_CUDA_ARCH_LIST": "7.5"}),
        ("gfx942", {"PYTORCH_ROCM_ARCH": "gfx942"}),
        (None, {}),
    ],
)
def test_torch_extensions_are_built_for_the_arch(arch: str | None, env: dict[str, str]) -> None:
    assert torch_arch_env(arch) == env
