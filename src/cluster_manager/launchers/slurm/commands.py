"""Runs Slurm's commands (sbatch, squeue, sacct, scancel): no shell, bounded in time."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

from cluster_manager.core.errors import LauncherError


@dataclass(frozen=True)
class Output:
    code: int
    stdout: str
    stderr: str


async def run(command: Sequence[str], timeout: float) -> Output:
    """Runs a command without a shell; a LauncherError if it cannot start or outlasts
    `timeout` seconds (an unresponsive slurmctld must not hang a poll)."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        raise LauncherError(f"cannot run {command[0]}: {exc.strerror or exc}") from exc
    try:
        async with asyncio.timeout(timeout):
            out, err = await proc.communicate()
    except TimeoutError:
        raise LauncherError(f"{command[0]} did not answer within {timeout:g} s") from None
    finally:
        if proc.returncode is None:  # timed out or cancelled: leave no child behind
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
    code = proc.returncode if proc.returncode is not None else -1
    return Output(code, out.decode(errors="replace"), err.decode(errors="replace"))


def checked(command: Sequence[str], out: Output) -> str:
    """The command's stdout, or a LauncherError with what it said if it failed."""
    if out.code != 0:
        detail = out.stderr.strip()[:1000] or out.stdout.strip()[:1000] or "no output"
        raise LauncherError(f"{command[0]} failed (exit {out.code}): {detail}")
    return out.stdout
