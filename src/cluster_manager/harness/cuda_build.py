"""Compiles a CUDA task's sources with nvcc, as the sandbox user, for the GPU type's arch."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from cluster_manager.core.arch import target_flags
from cluster_manager.core.models import RunRequest
from cluster_manager.core.run_results import CompileOutcome
from cluster_manager.harness import environment
from cluster_manager.sandbox import process
from cluster_manager.sandbox.plan import TMP_DIR, Sandbox, share, unsandboxed

CUDA_BINARY = "eval.out"


def compile_cuda(
    request: RunRequest, workdir: Path, env: dict[str, str], sandbox: Sandbox | None = None
) -> CompileOutcome:
    """Compiles as the sandbox user into its TMPDIR; the binary then becomes root's, read-only.
    The target is the GPU type's exact arch, unless the task's own flags choose one."""
    sandbox = sandbox or unsandboxed()
    cuda = request.task.cuda
    assert cuda is not None
    built = f"{TMP_DIR}/{CUDA_BINARY}"
    command = [
        os.environ.get("CLUSTER_MANAGER_NVCC", "nvcc"),
        *cuda.compile_flags,
        *target_flags(request.arch, cuda.compile_flags),
        *(f"-I{d}" for d in cuda.include_dirs),
        *(f"-D{k}={v}" for k, v in cuda.defines.items()),
        *cuda.sources,
        "-o",
        built,
    ]
    if shutil.which(command[0], path=env.get("PATH")) is None:
        return CompileOutcome(False, tuple(command), f"{command[0]} not found on PATH", 0.0)
    result = process.run_tree(
        sandbox.wrap(command, keep_files=True),  # the binary comes back from its TMPDIR
        cwd=workdir,
        env=env,
        timeout=request.limits.compile_timeout,
        output_cap=request.limits.output_bytes,
        limits=environment.limits(request, request.limits.compile_timeout, sandbox),
        isolation=sandbox.isolation,
    )
    if result.exit_code == 0 and (workdir / built).is_file():
        (workdir / built).replace(workdir / CUDA_BINARY)
        if sandbox.user is not None:
            share(workdir / CUDA_BINARY, executable=True)  # the submission cannot swap it
    output = (result.stdout + result.stderr).strip()
    if result.timed_out:
        output += f"\ncompilation exceeded {request.limits.compile_timeout:g} s"
    return CompileOutcome(
        success=result.exit_code == 0,
        command=tuple(command),
        output=output,
        duration_s=round(result.duration_s, 3),
    )
