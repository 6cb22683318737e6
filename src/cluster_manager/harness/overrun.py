"""What a failed phase ran into, when it was one of the run's own limits: memory (its cgroup
killed a process), processes, the writable space (ENOSPC), or, without a cgroup, the memory
calls the sandbox refuses. The verdict says memory_limit for the first; the message names the
limit for each, so the user sees why and by how much."""

from __future__ import annotations

from cluster_manager.core.models import Limits, Verdict
from cluster_manager.sandbox.process import ProcessResult

# How the C library and Python word ENOSPC; only the message depends on it, never a verdict.
NO_SPACE = "No space left on device"
# How a call refused without a cgroup (memfd_create, System V IPC: ENOMEM) reaches the message.
NO_MEMORY = ("Cannot allocate memory", "memfd_create", "shmget", "semget", "msgget")


def explain(
    phase: str,
    result: ProcessResult,
    limits: Limits,
    verdict: Verdict,
    message: str,
    *,
    refuses_uncounted: bool = False,
) -> tuple[Verdict, str]:
    """The phase's verdict and message, with the limit it hit named. A passing phase stays.
    `refuses_uncounted`: the sandbox refused memfd_create and System V IPC (no cgroup here)."""
    if verdict is Verdict.PASSED:
        return verdict, message
    usage = result.usage
    if usage is not None and usage.oom_kills and limits.memory_bytes is not None:
        return Verdict.MEMORY_LIMIT, (
            f"{phase}: out of memory: the run's memory limit of {limits.memory_bytes >> 20} MiB "
            "was reached (memfd, shared memory and tmpfs count) and a process was killed"
        )
    notes = []
    if usage is not None and usage.process_limit_hits:
        notes.append("the run's process limit was reached (threads count)")
    said = (message, result.stderr, result.stdout)
    # No usage: no cgroup held the tree, so its tmpfs mounts were no larger than its memory.
    disk = limits.disk_bytes
    if usage is None and limits.memory_bytes is not None:
        disk = min(disk, limits.memory_bytes)
    if any(NO_SPACE in text for text in said):
        notes.append(
            f"the run's disk limit of {disk >> 20} MiB was reached (HOME, "
            "TMPDIR, /tmp, /var/tmp and /dev/shm share it)"
        )
    if refuses_uncounted and any(word in text for text in said for word in NO_MEMORY):
        notes.append(
            "no cgroup counts this runner's memory, so memfd_create and System V shared "
            "memory, semaphores and message queues (shmget, semget, msgget) are refused with "
            "ENOMEM: share memory through /dev/shm (shm_open, sem_open), within the disk limit"
        )
    if notes:
        message += f" [{'; '.join(notes)}]"
    return verdict, message
