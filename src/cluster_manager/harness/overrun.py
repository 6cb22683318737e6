"""What a failed phase ran into, when it was one of the run's own limits: memory (its cgroup
killed a process), processes, or the writable space (ENOSPC). The verdict says memory_limit for
the first; the message names the limit for each, so the user sees why and by how much."""

from __future__ import annotations

from cluster_manager.core.models import Limits, Verdict
from cluster_manager.sandbox.process import ProcessResult

# How the C library and Python word ENOSPC; only the message depends on it, never a verdict.
NO_SPACE = "No space left on device"


def explain(
    phase: str, result: ProcessResult, limits: Limits, verdict: Verdict, message: str
) -> tuple[Verdict, str]:
    """The phase's verdict and message, with the limit it hit named. A passing phase stays."""
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
    if NO_SPACE in message or NO_SPACE in result.stderr or NO_SPACE in result.stdout:
        notes.append(
            f"the run's disk limit of {limits.disk_bytes >> 20} MiB was reached (HOME, "
            "TMPDIR, /tmp, /var/tmp and /dev/shm share it)"
        )
    if notes:
        message += f" [{'; '.join(notes)}]"
    return verdict, message
