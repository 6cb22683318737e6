"""How long a thread has waited for a CPU, and whether a process has stopped: what the kernel
says of the trusted stand-in (`/proc/PID/schedstat`'s run delay, nanoseconds runnable but not
running; `/proc/PID/stat`'s state). Moving a call's data takes what it takes on a CPU; waiting
for one is the machine's load, which the stand-in must not pass off as moving data: a
spinning process is preempted where a sleeping one is not."""

from __future__ import annotations

import os

OWN = "thread-self"


def _read(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, 1024)
    except OSError:
        return None
    finally:
        os.close(fd)


def waited_ns(task: int | str = OWN) -> int:
    """The run delay of `task` (a pid: its main thread; by default the calling thread) so
    far, or 0 where the kernel keeps none (no schedstats) or it is gone: then no wait is
    taken out."""
    stat = _read(f"/proc/{task}/schedstat")
    try:
        return int(stat.split()[1]) if stat else 0
    except (ValueError, IndexError):
        return 0


def is_stopped(pid: int) -> bool:
    """Whether `pid` is stopped by a signal (`T` in /proc/PID/stat), or gone: from then on
    its waits are all counted, and it waits for nothing more until it is let run."""
    stat = _read(f"/proc/{pid}/stat")
    fields = stat.rpartition(b")")[2].split() if stat else []
    return not fields or fields[0] in (b"T", b"t", b"Z", b"X")
