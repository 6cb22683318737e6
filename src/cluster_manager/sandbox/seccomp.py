"""The syscall filter of a sandboxed tree: a classic BPF program that bubblewrap loads
(`--seccomp FD`) just before it starts the command, inherited by everything the tree starts.

Everything is allowed except calls that reach past the sandbox's namespaces, its user or the
run's own processes: tracing or reading another process (ptrace, process_vm_*, pidfd_getfd),
kernel interfaces with a history of escapes (io_uring, userfaultfd, bpf, perf_event_open,
keyrings), new namespaces (unshare, setns, clone with a namespace flag), mounts, modules,
kexec, clocks, swap and the like. A refused call fails with EPERM, so a program reports a
clear error instead of dying. clone3 fails with ENOSYS: its flags are in memory, out of a
filter's reach, and the C library then falls back to clone, whose flags it can read.

A call of another ABI of the same machine (i386 on x86_64, arm32 on aarch64) kills the
process, since its numbers name other calls; x32 calls fail with ENOSYS. The filter is built
for the machine it runs on: x86_64 and aarch64 (the GPU hosts); elsewhere there is none and
the run says so. Standard library only: the runner's entrypoint imports this.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import os
import platform
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# linux/audit.h: the ABI a call was made through (seccomp_data.arch).
AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_AARCH64 = 0xC00000B7
X32_SYSCALL_BIT = 0x40000000

# linux/filter.h and linux/seccomp.h.
BPF_LD_W_ABS = 0x20
BPF_JEQ_K = 0x15
BPF_JGE_K = 0x35
BPF_JSET_K = 0x45
BPF_RET_K = 0x06
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6] (little-endian).
NR_OFFSET = 0
ARCH_OFFSET = 4
ARGS_OFFSET = 16
INSTRUCTION = struct.Struct("=HBBI")  # struct sock_filter: code, jt, jf, k

CLONE_NEWTIME = 0x00000080
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
# clone's low byte is the exit signal, so CLONE_NEWTIME (0x80) is only a flag to unshare.
CLONE_NAMESPACES = (
    CLONE_NEWNS
    | CLONE_NEWCGROUP
    | CLONE_NEWUTS
    | CLONE_NEWIPC
    | CLONE_NEWUSER
    | CLONE_NEWPID
    | CLONE_NEWNET
)
UNSHARE_NAMESPACES = CLONE_NAMESPACES | CLONE_NEWTIME
PER_LINUX = 0
PERSONALITY_QUERY = 0xFFFFFFFF
AF_VSOCK = 40
# setpriority's and ioprio_set's `which`: only the caller itself (who 0). A process group
# (PRIO_PGRP) may hold the harness: a child of a task's own eval.py shares its group, PID 1's,
# so even who 0 reaches it there; every process of the user (PRIO_USER) holds it too.
PRIO_PROCESS, PRIO_PGRP, PRIO_USER = 0, 1, 2
IOPRIO_WHO_PROCESS, IOPRIO_WHO_PGRP, IOPRIO_WHO_USER = 1, 2, 3
# With --as-pid-1 the phase's first process is PID 1 of the sandbox: the harness, ours or a
# task's own eval.py, which the submission runs under and did not start.
HARNESS_PID = 1

SYSCALLS_KEY = "syscalls"  # RunResult.system: whether the tree ran behind the filter
FILTERED = "filtered"


@dataclass(frozen=True)
class Rule:
    """`call` fails with `error`: always, or only when the low 32 bits of its argument `arg`
    have a bit of `any_bits`, equal one of `equals`, or are none of `unless`; or, with
    `only`, unless each (argument, values) pair finds its argument's low 32 bits among the
    values (a call judged by two arguments, as setpriority's `which` and `who`)."""

    call: str
    why: str
    error: int = errno.EPERM
    arg: int = 0
    any_bits: int = 0
    equals: tuple[int, ...] = ()
    unless: tuple[int, ...] = ()
    only: tuple[tuple[int, tuple[int, ...]], ...] = ()


_OTHER_PROCESS = "reads or controls another process of the same user (a helper of the harness)"
_ESCAPES = "a large kernel interface behind many privilege escalations; no task needs it"
_NAMESPACE = "a namespace of its own would give it capabilities there and a way round the sandbox"
_MOUNT = "changes what the sandbox shows; nothing to mount for a task"
_HOST = "acts on the whole machine, not on the run"
_SCHEDULE = "slows or moves the phase's harness, a process the submission did not start"
_UNCOUNTED = "memory no rlimit counts: refused where no memory cgroup holds the run"

RULES: tuple[Rule, ...] = (
    Rule("ptrace", _OTHER_PROCESS),
    Rule("process_vm_readv", _OTHER_PROCESS),
    Rule("process_vm_writev", _OTHER_PROCESS),
    Rule("pidfd_open", _OTHER_PROCESS),
    Rule("pidfd_getfd", _OTHER_PROCESS),
    Rule("process_madvise", _OTHER_PROCESS),
    Rule("kcmp", "compares kernel objects of other processes (an information leak)"),
    Rule("io_uring_setup", _ESCAPES),
    Rule("io_uring_enter", _ESCAPES),
    Rule("io_uring_register", _ESCAPES),
    Rule("userfaultfd", "stalls the kernel at a chosen page fault: a tool of race exploits"),
    Rule("bpf", _ESCAPES),
    Rule("perf_event_open", "hardware counters and timing side channels on shared CPUs"),
    Rule("keyctl", "kernel keyrings outlive the run and are not namespaced"),
    Rule("add_key", "kernel keyrings outlive the run and are not namespaced"),
    Rule("request_key", "kernel keyrings outlive the run and are not namespaced"),
    Rule("unshare", _NAMESPACE, any_bits=UNSHARE_NAMESPACES),
    Rule("clone", _NAMESPACE, any_bits=CLONE_NAMESPACES),
    Rule("clone3", "its flags are out of the filter's reach: the C library falls back to clone",
         error=errno.ENOSYS),
    Rule("setns", _NAMESPACE),
    Rule("mount", _MOUNT),
    Rule("umount2", _MOUNT),
    Rule("pivot_root", _MOUNT),
    Rule("chroot", _MOUNT),
    Rule("move_mount", _MOUNT),
    Rule("open_tree", _MOUNT),
    Rule("fsopen", _MOUNT),
    Rule("fsconfig", _MOUNT),
    Rule("fsmount", _MOUNT),
    Rule("fspick", _MOUNT),
    Rule("mount_setattr", _MOUNT),
    Rule("name_to_handle_at", "opens files by handle, past the sandbox's paths"),
    Rule("open_by_handle_at", "opens files by handle, past the sandbox's paths"),
    Rule("kexec_load", _HOST),
    Rule("kexec_file_load", _HOST),
    Rule("init_module", _HOST),
    Rule("finit_module", _HOST),
    Rule("delete_module", _HOST),
    Rule("reboot", _HOST),
    Rule("swapon", _HOST),
    Rule("swapoff", _HOST),
    Rule("acct", _HOST),
    Rule("quotactl", _HOST),
    Rule("quotactl_fd", _HOST),
    Rule("lookup_dcookie", _HOST),
    Rule("settimeofday", "the clock that times every run"),
    Rule("clock_settime", "the clock that times every run"),
    Rule("adjtimex", "the clock that times every run"),
    Rule("clock_adjtime", "the clock that times every run"),
    Rule("syslog", "the kernel log holds the host's addresses and messages"),
    Rule("vhangup", _HOST),
    Rule("sethostname", _HOST),
    Rule("setdomainname", _HOST),
    Rule("fanotify_init", "watches file access across the machine"),
    Rule("iopl", "direct I/O port access"),
    Rule("ioperm", "direct I/O port access"),
    Rule("uselib", "an obsolete loader interface"),
    Rule("_sysctl", "an obsolete interface to kernel settings"),
    Rule("personality", "turns off address randomisation and other defaults",
         unless=(PER_LINUX, PERSONALITY_QUERY)),
    Rule("socket", "vsock is not namespaced: it reaches the hypervisor or host past the "
         "network namespace", error=errno.EAFNOSUPPORT, equals=(AF_VSOCK,)),
    # Only its own priority (who = 0): by pid, for its group or for the whole user it would
    # reach the harness. The PID namespace keeps every other call below inside the run's tree.
    Rule("setpriority", _SCHEDULE, only=((0, (PRIO_PROCESS,)), (1, (0,)))),
    Rule("ioprio_set", _SCHEDULE, only=((0, (IOPRIO_WHO_PROCESS,)), (1, (0,)))),
    Rule("sched_setaffinity", _SCHEDULE, equals=(HARNESS_PID,)),
    Rule("sched_setscheduler", _SCHEDULE, equals=(HARNESS_PID,)),
    Rule("sched_setparam", _SCHEDULE, equals=(HARNESS_PID,)),
    Rule("sched_setattr", _SCHEDULE, equals=(HARNESS_PID,)),
    Rule("prlimit64", _SCHEDULE, equals=(HARNESS_PID,)),
    Rule("migrate_pages", _SCHEDULE, equals=(HARNESS_PID,)),
    Rule("move_pages", _SCHEDULE, equals=(HARNESS_PID,)),
)  # fmt: skip

# Added where no memory cgroup holds the run (an ordinary user's runner without delegation):
# this memory counts against no rlimit, so without a cgroup nothing would bound it: memfd and
# System V shared memory pages, and the kernel's own memory behind System V semaphore sets and
# message queues (32000 sets of 32000 semaphores each: tens of GiB). What is left to a tree is
# anonymous memory (RLIMIT_AS) and files in its size-capped tmpfs mounts (POSIX shared memory
# and semaphores, shm_open and sem_open, live in /dev/shm, one of them). ENOMEM: to the
# submission this memory is used up, and the harness judges it as such (memory_limit).
UNCOUNTED_MEMORY: tuple[Rule, ...] = (
    Rule("memfd_create", _UNCOUNTED, error=errno.ENOMEM),
    Rule("memfd_secret", _UNCOUNTED, error=errno.ENOMEM),
    Rule("shmget", _UNCOUNTED, error=errno.ENOMEM),
    Rule("semget", _UNCOUNTED, error=errno.ENOMEM),
    Rule("msgget", _UNCOUNTED, error=errno.ENOMEM),
)

# Call numbers, from the kernel's tables (arch/x86/entry/syscalls/syscall_64.tbl and the
# generic table aarch64 uses). Calls absent from a table do not exist on that machine.
X86_64: Mapping[str, int] = {
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_open": 434,
    "pidfd_getfd": 438, "process_madvise": 440, "kcmp": 312, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "userfaultfd": 323, "bpf": 321,
    "perf_event_open": 298, "keyctl": 250, "add_key": 248, "request_key": 249, "unshare": 272,
    "clone": 56, "clone3": 435, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155,
    "chroot": 161, "move_mount": 429, "open_tree": 428, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "mount_setattr": 442, "name_to_handle_at": 303,
    "open_by_handle_at": 304, "kexec_load": 246, "kexec_file_load": 320, "init_module": 175,
    "finit_module": 313, "delete_module": 176, "reboot": 169, "swapon": 167, "swapoff": 168,
    "acct": 163, "quotactl": 179, "quotactl_fd": 443, "lookup_dcookie": 212,
    "settimeofday": 164, "clock_settime": 227, "adjtimex": 159, "clock_adjtime": 305,
    "syslog": 103, "vhangup": 153, "sethostname": 170, "setdomainname": 171,
    "fanotify_init": 300, "iopl": 172, "ioperm": 173, "uselib": 134, "_sysctl": 156,
    "personality": 135, "socket": 41,
    # Calls the harness's worker filters by target (harness/guard.py).
    "kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297,
    "pidfd_send_signal": 424, "sched_setaffinity": 203, "sched_setscheduler": 144,
    "sched_setparam": 142, "sched_setattr": 314, "setpriority": 141, "prlimit64": 302,
    "migrate_pages": 256, "move_pages": 279, "setpgid": 109, "setsid": 112,
    "ioprio_set": 251, "memfd_create": 319, "memfd_secret": 447, "shmget": 29, "semget": 64,
    "msgget": 68,
}  # fmt: skip
AARCH64: Mapping[str, int] = {
    "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "pidfd_open": 434,
    "pidfd_getfd": 438, "process_madvise": 440, "kcmp": 272, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "userfaultfd": 282, "bpf": 280,
    "perf_event_open": 241, "keyctl": 219, "add_key": 217, "request_key": 218, "unshare": 97,
    "clone": 220, "clone3": 435, "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41,
    "chroot": 51, "move_mount": 429, "open_tree": 428, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "mount_setattr": 442, "name_to_handle_at": 264,
    "open_by_handle_at": 265, "kexec_load": 104, "kexec_file_load": 294, "init_module": 105,
    "finit_module": 273, "delete_module": 106, "reboot": 142, "swapon": 224, "swapoff": 225,
    "acct": 89, "quotactl": 60, "quotactl_fd": 443, "lookup_dcookie": 18,
    "settimeofday": 170, "clock_settime": 112, "adjtimex": 171, "clock_adjtime": 266,
    "syslog": 116, "vhangup": 58, "sethostname": 161, "setdomainname": 162,
    "fanotify_init": 262, "personality": 92, "socket": 198,
    "kill": 129, "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240,
    "pidfd_send_signal": 424, "sched_setaffinity": 122, "sched_setscheduler": 119,
    "sched_setparam": 118, "sched_setattr": 274, "setpriority": 140, "prlimit64": 261,
    "migrate_pages": 238, "move_pages": 239, "setpgid": 154, "setsid": 157,
    "ioprio_set": 30, "memfd_create": 279, "memfd_secret": 447, "shmget": 194, "semget": 190,
    "msgget": 186,
}  # fmt: skip


@dataclass(frozen=True)
class Abi:
    audit_arch: int
    numbers: Mapping[str, int]
    x32: bool = False  # x86_64: calls with X32_SYSCALL_BIT set belong to the x32 ABI


ABIS: Mapping[str, Abi] = {
    "x86_64": Abi(AUDIT_ARCH_X86_64, X86_64, x32=True),
    "aarch64": Abi(AUDIT_ARCH_AARCH64, AARCH64),
}
MACHINE_NAMES = {"amd64": "x86_64", "arm64": "aarch64"}


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return INSTRUCTION.pack(code, jt, jf, k & 0xFFFFFFFF)


def _ret(action: int) -> bytes:
    return _op(BPF_RET_K, action)


def _errno(error: int) -> bytes:
    return _ret(SECCOMP_RET_ERRNO | error)


def _only(rule: Rule) -> list[bytes]:
    """Each argument in turn must be one of its values (a match jumps past the refusal to
    the next argument's check); past the last, the call is allowed."""
    code: list[bytes] = []
    for arg, values in rule.only:
        code.append(_op(BPF_LD_W_ABS, ARGS_OFFSET + 8 * arg))
        code += [_op(BPF_JEQ_K, v, len(values) - i, 0) for i, v in enumerate(values)]
        code.append(_errno(rule.error))
    return [*code, _ret(SECCOMP_RET_ALLOW)]


def _conditional(rule: Rule) -> list[bytes]:
    """The checks after the call number matched; every path returns, so the next rule
    never sees the argument in the accumulator."""
    if rule.only:
        return _only(rule)
    checks = [_op(BPF_LD_W_ABS, ARGS_OFFSET + 8 * rule.arg)]  # the low half (little-endian)
    if rule.any_bits:
        refuse = [_op(BPF_JSET_K, rule.any_bits, 0, 1), _errno(rule.error)]
        return [*checks, *refuse, _ret(SECCOMP_RET_ALLOW)]
    values = rule.equals or rule.unless
    # Each comparison jumps over the ones after it to the last two: allow, refuse.
    hit, miss = (_errno(rule.error), _ret(SECCOMP_RET_ALLOW))
    if rule.unless:
        hit, miss = miss, hit
    checks += [_op(BPF_JEQ_K, v, len(values) - i, 0) for i, v in enumerate(values)]
    return [*checks, miss, hit]


def _rule(rule: Rule, number: int) -> list[bytes]:
    if not (rule.any_bits or rule.equals or rule.unless or rule.only):
        return [_op(BPF_JEQ_K, number, 0, 1), _errno(rule.error)]
    body = _conditional(rule)
    return [_op(BPF_JEQ_K, number, 0, len(body)), *body]


def program(machine: str | None = None, rules: Sequence[Rule] = RULES) -> bytes | None:
    """The filter of `rules` for `machine` (this one by default) as struct sock_filter[], or
    None where there is none."""
    name = machine or platform.machine()
    abi = ABIS.get(MACHINE_NAMES.get(name, name))
    if abi is None:
        return None
    code = [
        _op(BPF_LD_W_ABS, ARCH_OFFSET),
        _op(BPF_JEQ_K, abi.audit_arch, 1, 0),
        _ret(SECCOMP_RET_KILL_PROCESS),  # another ABI: the numbers below mean other calls
        _op(BPF_LD_W_ABS, NR_OFFSET),
    ]
    if abi.x32:
        code += [_op(BPF_JGE_K, X32_SYSCALL_BIT, 0, 1), _errno(errno.ENOSYS)]
    for rule in rules:
        if rule.call in abi.numbers:
            code += _rule(rule, abi.numbers[rule.call])
    code.append(_ret(SECCOMP_RET_ALLOW))
    return b"".join(code)


def state() -> str:
    """What RunResult.system says of a fully sandboxed run's syscalls."""
    if program() is None:
        return f"not filtered (no syscall filter for this architecture: {platform.machine()})"
    return FILTERED


@functools.cache
def shared_fd(memory_cgroup: bool = True) -> int | None:
    """This process's filter in a sealed memfd (closed on exec), made once per kind; None
    where there is no filter. Each tree gets its own description of it (`reopen`).
    `memory_cgroup`: a cgroup holds the trees' memory; without one, `UNCOUNTED_MEMORY` too."""
    code = program(rules=RULES if memory_cgroup else (*RULES, *UNCOUNTED_MEMORY))
    if code is None:
        return None
    fd = os.memfd_create("cm-seccomp", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.write(fd, code)
    seals = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd


def reopen(fd: int) -> int:
    """A new description of the memfd `fd`, at offset 0: bubblewrap reads the filter to its
    end, and runs started at the same time must not share a position in it."""
    return os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)


def rearm_in_child(fd: int) -> None:
    """In a forked child before exec: `fd` becomes a description of its own, at offset 0, and
    survives the exec (dup2 clears close-on-exec)."""
    fresh = reopen(fd)
    os.dup2(fresh, fd)
    os.close(fresh)


PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


def install(code: bytes) -> None:
    """Puts this process (each thread started from now on, and every child) behind `code`.
    Filters stack: one installed here only adds to bubblewrap's. Raises OSError if refused."""
    import ctypes  # here: only a process that filters itself needs it

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    prog = SockFprog(len(code) // INSTRUCTION.size, code)
    for option, argument in (
        (PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1)),
        (PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER)),
    ):
        pointer = ctypes.byref(prog) if option == PR_SET_SECCOMP else None
        if libc.prctl(option, argument, pointer, 0, 0) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"prctl({option}): {os.strerror(error)}")
