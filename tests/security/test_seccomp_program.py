"""The syscall filter itself: the BPF program `sandbox.seccomp` builds, loaded with
prctl(PR_SET_SECCOMP) into a fresh Python that then tries allowed and refused calls, and the
same program run by a small classic-BPF interpreter for the machines this one is not.
"""

from __future__ import annotations

import errno
import json
import os
import platform
import signal
import struct
import subprocess
import sys
import textwrap

import pytest

from cluster_manager.core.sandboxing import LIMITS_KEY
from cluster_manager.sandbox import bwrap, cgroups, seccomp
from cluster_manager.sandbox.plan import (
    NOT_FILTERED,
    PRIVATE_MOUNTS,
    UNCOUNTED_REFUSED,
    plan_sandbox,
)
from cluster_manager.sandbox.spec import SandboxSpec, View

NATIVE = platform.machine() in seccomp.ABIS
native_only = pytest.mark.skipif(not NATIVE, reason="no syscall filter for this machine")

# Loads the filter into this process: PR_SET_NO_NEW_PRIVS, then PR_SET_SECCOMP.
_LOAD = textwrap.dedent(
    r"""
    import ctypes
    from cluster_manager.sandbox import seccomp

    libc = ctypes.CDLL(None, use_errno=True)
    code = seccomp.program()

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    program = Program(len(code) // 8, code)
    assert libc.prctl(38, 1, 0, 0, 0) == 0
    assert libc.prctl(22, 2, ctypes.byref(program), 0, 0) == 0, ctypes.get_errno()
    """
)
# Then tries each call; prints {name: "ok" | errno name}.
_LOADER = _LOAD + textwrap.dedent(
    r"""
    import errno, json, os, platform, socket, subprocess, threading

    numbers = seccomp.ABIS[platform.machine()].numbers

    def call(number, *args):
        result = libc.syscall(ctypes.c_long(number), *(ctypes.c_long(a) for a in args))
        return "ok" if result >= 0 else errno.errorcode[ctypes.get_errno()]

    found = {
        "getpid": call(39 if platform.machine() == "x86_64" else 172),
        "ptrace traceme": call(numbers["ptrace"], 0, 0, 0, 0),
        "unshare newuser": call(numbers["unshare"], 0x10000000),
        "unshare newtime": call(numbers["unshare"], 0x80),
        "unshare files": call(numbers["unshare"], 0x400),  # CLONE_FILES: no namespace
        "clone3": call(numbers["clone3"], 0, 0),
        "setns": call(numbers["setns"], -1, 0),
        "keyctl": call(numbers["keyctl"], 0, 0),
        "personality query": call(numbers["personality"], 0xFFFFFFFF),
        "personality no aslr": call(numbers["personality"], 0x0040000),
    }
    if platform.machine() == "x86_64":
        found["x32 getpid"] = call(39 | 0x40000000)
    try:
        socket.socket(40, socket.SOCK_STREAM).close()  # AF_VSOCK
        found["vsock"] = "ok"
    except OSError as exc:
        found["vsock"] = errno.errorcode[exc.errno]
    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
    thread = threading.Thread(target=lambda: None)
    thread.start()  # glibc tries clone3 first, then clone
    thread.join()
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    found["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    found["spawn"] = subprocess.run(["true"], check=False).returncode
    print(json.dumps(found))
    """
)


def _run_filtered(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )


@native_only
def test_the_filter_refuses_what_it_lists_and_allows_the_rest():
    done = _run_filtered(_LOADER)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    for call in ("ptrace traceme", "unshare newuser", "unshare newtime", "setns", "keyctl"):
        assert found[call] == "EPERM", (call, found)
    assert found["personality no aslr"] == "EPERM", found
    assert found["clone3"] == "ENOSYS", found  # glibc falls back to clone
    assert found["vsock"] == "EAFNOSUPPORT", found
    assert found.get("x32 getpid", "ENOSYS") == "ENOSYS", found
    for call in ("getpid", "unshare files", "personality query"):
        assert found[call] == "ok", (call, found)
    assert found["fork"] == 7 and found["spawn"] == 0, found


# i386's getpid through int 0x80, from a 64-bit process: mov eax, 20; int 0x80; ret
_OTHER_ABI = _LOAD + textwrap.dedent(
    r"""
    import mmap

    page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(bytes.fromhex("b814000000cd80c3"))
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    ctypes.CFUNCTYPE(ctypes.c_int)(address)()
    print("survived")
    """
)


@pytest.mark.reliability(
    "Sandbox",
    "an i386 call (int 0x80) from a 64-bit process, whose numbers name other calls",
    "the filter kills the process (SIGSYS)",
)
@pytest.mark.skipif(platform.machine() != "x86_64", reason="i386 calls exist on x86_64 only")
def test_a_call_of_another_abi_kills_the_process(record_property):
    done = _run_filtered(_OTHER_ABI)
    assert done.returncode == -signal.SIGSYS, (done.returncode, done.stdout, done.stderr)
    assert "survived" not in done.stdout
    record_property("observed", f"killed by signal {-done.returncode} (SIGSYS)")


def _evaluate(code: bytes, arch: int, nr: int, args: tuple[int, ...] = ()) -> int:
    """Runs a classic BPF program over struct seccomp_data; the opcodes the builder uses."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(list(args) + [0] * (6 - len(args))))
    accumulator, pc = 0, 0
    while True:
        op, jt, jf, k = seccomp.INSTRUCTION.unpack_from(code, pc * 8)
        pc += 1
        if op == seccomp.BPF_LD_W_ABS:
            accumulator = struct.unpack_from("<I", data, k)[0]
        elif op == seccomp.BPF_RET_K:
            return k
        else:
            taken = {
                seccomp.BPF_JEQ_K: accumulator == k,
                seccomp.BPF_JGE_K: accumulator >= k,
                seccomp.BPF_JSET_K: accumulator & k != 0,
            }[op]
            pc += jt if taken else jf


DENY = seccomp.SECCOMP_RET_ERRNO | errno.EPERM


@pytest.mark.parametrize("machine", sorted(seccomp.ABIS))
def test_every_listed_call_is_refused_on_each_machine(machine):
    abi = seccomp.ABIS[machine]
    code = seccomp.program(machine)
    assert code is not None and len(code) % 8 == 0 and len(code) // 8 < 4096
    for rule in seccomp.RULES:
        if rule.call not in abi.numbers:
            continue
        arg = rule.any_bits or (rule.equals[0] if rule.equals else 0x40000)
        action = seccomp.SECCOMP_RET_ERRNO | rule.error
        assert _evaluate(code, abi.audit_arch, abi.numbers[rule.call], (arg,)) == action, rule
    getpid = 39 if machine == "x86_64" else 172
    assert _evaluate(code, abi.audit_arch, getpid) == seccomp.SECCOMP_RET_ALLOW


@pytest.mark.parametrize("machine", sorted(seccomp.ABIS))
def test_arguments_decide_clone_unshare_personality_and_socket(machine):
    abi = seccomp.ABIS[machine]
    code = seccomp.program(machine)
    assert code is not None

    def verdict(call: str, *args: int) -> int:
        return _evaluate(code, abi.audit_arch, abi.numbers[call], args)

    fork_like = 0x01200011  # CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD
    thread = 0x003D0F00  # what glibc's pthread_create passes to clone
    assert verdict("clone", fork_like) == verdict("clone", thread) == seccomp.SECCOMP_RET_ALLOW
    for flag in (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000):
        assert verdict("clone", fork_like | flag) == DENY, hex(flag)
        assert verdict("unshare", flag) == DENY, hex(flag)
    assert verdict("unshare", 0x80) == DENY  # CLONE_NEWTIME
    assert verdict("unshare", 0x400) == seccomp.SECCOMP_RET_ALLOW  # CLONE_FILES
    # Only the low 32 bits of an int argument count: high ones cannot hide a flag.
    assert verdict("unshare", (1 << 32) | 0x10000000) == DENY
    assert verdict("personality", 0) == verdict("personality", 0xFFFFFFFF)
    assert verdict("personality", 0) == seccomp.SECCOMP_RET_ALLOW
    assert verdict("personality", 0x0040000) == DENY
    vsock = seccomp.SECCOMP_RET_ERRNO | errno.EAFNOSUPPORT
    assert verdict("socket", 40) == vsock
    assert verdict("socket", 2) == verdict("socket", 1) == seccomp.SECCOMP_RET_ALLOW
    assert verdict("clone3") == seccomp.SECCOMP_RET_ERRNO | errno.ENOSYS


def test_other_abis_are_killed_and_x32_calls_fail():
    x86, arm = seccomp.ABIS["x86_64"], seccomp.ABIS["aarch64"]
    code = seccomp.program("x86_64")
    assert code is not None
    i386 = 0x40000003
    assert _evaluate(code, i386, 20) == seccomp.SECCOMP_RET_KILL_PROCESS
    assert _evaluate(code, arm.audit_arch, 172) == seccomp.SECCOMP_RET_KILL_PROCESS
    x32_getpid = seccomp.X32_SYSCALL_BIT | 39
    assert _evaluate(code, x86.audit_arch, x32_getpid) == seccomp.SECCOMP_RET_ERRNO | errno.ENOSYS
    arm_code = seccomp.program("arm64")  # the name some systems give aarch64
    assert arm_code is not None
    arm32 = 0x40000028
    assert _evaluate(arm_code, arm32, 20) == seccomp.SECCOMP_RET_KILL_PROCESS


def test_an_unknown_machine_has_no_filter_and_says_so(monkeypatch):
    assert seccomp.program("riscv64") is None
    monkeypatch.setattr(seccomp.platform, "machine", lambda: "riscv64")
    assert seccomp.state() == "not filtered (no syscall filter for this architecture: riscv64)"
    args = bwrap.argv(SandboxSpec(View()), bwrap="bwrap", setpriv=None, as_root=False)
    assert "--seccomp" not in args


@native_only
def test_each_tree_reads_the_filter_from_the_start():
    """Runs share one memfd: each reopened description starts at offset 0."""
    shared = seccomp.shared_fd()
    assert shared is not None
    first, second = seccomp.reopen(shared), seccomp.reopen(shared)
    try:
        with open(first, "rb", closefd=False) as fh:
            assert fh.read() == seccomp.program()
        with open(second, "rb", closefd=False) as fh:
            assert fh.read() == seccomp.program()
    finally:
        os.close(first)
        os.close(second)


def test_a_partial_sandbox_says_its_syscalls_are_not_filtered(monkeypatch, tmp_path):
    monkeypatch.setenv(bwrap.BWRAP_SETTING, "off")
    for name in (".home", ".tmp"):
        (tmp_path / name).mkdir()
    sandbox = plan_sandbox(tmp_path)
    assert sandbox.info[seccomp.SYSCALLS_KEY] == NOT_FILTERED
    assert not sandbox.prefix and sandbox.isolation.syscall_filter is None
    assert not sandbox.refuses_uncounted  # no filter: it cannot say it refuses anything


@pytest.mark.parametrize("machine", sorted(seccomp.ABIS))
def test_priority_and_placement_reach_only_processes_other_than_the_harness(machine):
    abi = seccomp.ABIS[machine]
    code = seccomp.program(machine)
    assert code is not None

    def verdict(call: str, *args: int) -> int:
        return _evaluate(code, abi.audit_arch, abi.numbers[call], args)

    allow, harness, child = seccomp.SECCOMP_RET_ALLOW, seccomp.HARNESS_PID, 57
    # Its own priority only: nothing by pid, for a group (its own may be the harness's: a
    # child of a task's eval.py shares PID 1's) or for the whole user.
    assert verdict("setpriority", seccomp.PRIO_PROCESS, 0) == allow
    assert verdict("ioprio_set", seccomp.IOPRIO_WHO_PROCESS, 0) == allow
    for which in (seccomp.PRIO_PROCESS, seccomp.PRIO_PGRP, seccomp.PRIO_USER):
        for who in {0, harness, child} - ({0} if which == seccomp.PRIO_PROCESS else set()):
            assert verdict("setpriority", which, who) == DENY, (which, who)
    for which in (seccomp.IOPRIO_WHO_PROCESS, seccomp.IOPRIO_WHO_PGRP, seccomp.IOPRIO_WHO_USER):
        for who in {0, harness, child} - ({0} if which == seccomp.IOPRIO_WHO_PROCESS else set()):
            assert verdict("ioprio_set", which, who) == DENY, (which, who)
    # Scheduling, placement and limits: of itself, its threads and children; not the harness,
    # also behind high bits the kernel drops from a pid_t.
    for call in ("sched_setaffinity", "sched_setscheduler", "sched_setattr", "prlimit64"):
        assert verdict(call, 0) == verdict(call, child) == allow, call
        assert verdict(call, harness) == verdict(call, (1 << 32) | harness) == DENY, call


@pytest.mark.parametrize("machine", sorted(seccomp.ABIS))
def test_without_a_memory_cgroup_memfd_and_system_v_ipc_are_refused(machine):
    abi = seccomp.ABIS[machine]
    counted = seccomp.program(machine)
    uncounted = seccomp.program(machine, (*seccomp.RULES, *seccomp.UNCOUNTED_MEMORY))
    assert counted is not None and uncounted is not None
    used_up = seccomp.SECCOMP_RET_ERRNO | errno.ENOMEM  # judged as memory_limit
    for call in ("memfd_create", "memfd_secret", "shmget", "semget", "msgget"):
        number = abi.numbers[call]
        assert _evaluate(counted, abi.audit_arch, number) == seccomp.SECCOMP_RET_ALLOW, call
        assert _evaluate(uncounted, abi.audit_arch, number) == used_up, call


@native_only
def test_a_run_no_cgroup_holds_gets_the_stricter_filter_and_tmpfs_within_its_memory(
    monkeypatch, tmp_path
):
    if bwrap.probe(os.geteuid() == 0) is not None:
        pytest.skip("bubblewrap cannot start a sandbox here")
    for name in (".home", ".tmp"):
        (tmp_path / name).mkdir()
    memory, disk = 600 << 20, 4000 << 20

    def filter_of(sandbox) -> bytes:
        fd = seccomp.reopen(sandbox.isolation.syscall_filter)
        with open(fd, "rb") as fh:
            return fh.read()

    has_cgroup = not isinstance(cgroups.backend(), str)
    grouped = plan_sandbox(tmp_path, disk_bytes=disk, memory_bytes=memory)
    monkeypatch.setattr(cgroups, "backend", lambda: "no cgroup on this machine")
    alone = plan_sandbox(tmp_path, disk_bytes=disk, memory_bytes=memory)
    assert filter_of(alone) == seccomp.program(rules=(*seccomp.RULES, *seccomp.UNCOUNTED_MEMORY))
    assert str(memory // PRIVATE_MOUNTS) in alone.prefix
    assert str(disk // PRIVATE_MOUNTS) not in alone.prefix
    assert alone.refuses_uncounted and UNCOUNTED_REFUSED in alone.info[LIMITS_KEY]
    if has_cgroup:
        assert filter_of(grouped) == seccomp.program()
        assert str(disk // PRIVATE_MOUNTS) in grouped.prefix
