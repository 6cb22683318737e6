"""What of the kernel a hostile submission reaches, on a root runner and on an ordinary user's:
the calls the sandbox's syscall filter refuses, and the host's /proc and /sys views it hides.

The submission (`hostile.py`) tries each call once in every process it is imported into and
reports the errno; the filter answers EPERM before the kernel looks at the arguments, so even
a call that would fail for another reason (a missing path: ENOENT) reports EPERM. After the run
the host's mount table and BPF pins are as before (`conftest._host_state`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster_manager.sandbox.seccomp import SYSCALLS_KEY
from tests.security.conftest import Observation

pytestmark = [pytest.mark.adversarial, pytest.mark.slow]


def _reports(observation: Observation, family: str) -> list:
    assert observation.reports, f"the hostile submission never reported: {observation.verdict}"
    return [report[family] for report in observation.reports]


def _refused(observation: Observation, record_property, *calls: str) -> None:
    """Each of `calls` failed with EPERM in every report, and the host is as it was."""
    for found in _reports(observation, "syscalls"):
        for call in calls:
            assert found.get(call) == "EPERM", (call, found)
    assert observation.system.get(SYSCALLS_KEY) == "filtered", observation.system
    assert observation.host_changes == [], observation.host_changes
    record_property("observed", f"{observation.kind}: {', '.join(calls)}: EPERM; host unchanged")


@pytest.mark.reliability(
    "Sandbox",
    "PTRACE_ATTACH to a sibling process of the same user (where a harness helper would be)",
    "EPERM from the syscall filter; the host unchanged",
)
def test_ptrace_of_a_sibling_is_refused(hostile_run: Observation, record_property):
    _refused(hostile_run, record_property, "ptrace")


@pytest.mark.reliability(
    "Sandbox",
    "pidfd_open of a sibling, then pidfd_getfd to copy its file descriptors",
    "both EPERM from the syscall filter; the host unchanged",
)
def test_pidfd_getfd_is_refused(hostile_run: Observation, record_property):
    _refused(hostile_run, record_property, "pidfd_open", "pidfd_getfd")


@pytest.mark.reliability(
    "Sandbox",
    "io_uring_setup (an io_uring reaches sockets and files past other checks)",
    "EPERM from the syscall filter; the host unchanged",
)
def test_io_uring_is_refused(hostile_run: Observation, record_property):
    _refused(hostile_run, record_property, "io_uring_setup")


@pytest.mark.reliability(
    "Sandbox",
    "userfaultfd in user mode (allowed unprivileged; stalls the kernel for race exploits)",
    "EPERM from the syscall filter; the host unchanged",
)
def test_userfaultfd_is_refused(hostile_run: Observation, record_property):
    _refused(hostile_run, record_property, "userfaultfd")


@pytest.mark.reliability(
    "Sandbox",
    "bpf (BPF_OBJ_GET of a pinned object: the kernel would answer ENOENT)",
    "EPERM from the syscall filter; no BPF object pinned on the host",
)
def test_bpf_is_refused(hostile_run: Observation, record_property):
    _refused(hostile_run, record_property, "bpf")


@pytest.mark.reliability(
    "Sandbox",
    "unshare(CLONE_NEWUSER): a nested user namespace, with every capability inside it",
    "EPERM from the syscall filter on both runners (root's has no --disable-userns)",
)
def test_unshare_of_a_user_namespace_is_refused(hostile_run: Observation, record_property):
    _refused(hostile_run, record_property, "unshare user")


@pytest.mark.reliability(
    "Sandbox",
    "clone(CLONE_NEWUSER | CLONE_NEWNS): a child in a mount namespace of its own",
    "EPERM from the syscall filter; no child started",
)
def test_clone_into_new_namespaces_is_refused(hostile_run: Observation, record_property):
    _refused(hostile_run, record_property, "clone newuser newns")


@pytest.mark.reliability(
    "Sandbox",
    "mount a tmpfs on /tmp after trying for a user namespace, and on a missing path",
    "EPERM both times, before the kernel looks up the path; the host's mounts unchanged",
)
def test_mount_is_refused(hostile_run: Observation, record_property):
    _refused(hostile_run, record_property, "mount", "mount missing")


@pytest.mark.reliability(
    "Sandbox",
    "perf_event_open of a user-space counter of its own (allowed unprivileged)",
    "EPERM from the syscall filter; the host unchanged",
)
def test_perf_event_open_is_refused(hostile_run: Observation, record_property):
    _refused(hostile_run, record_property, "perf_event_open")


def _views(observation: Observation) -> list[dict]:
    return _reports(observation, "kernel")


@pytest.mark.reliability(
    "Sandbox",
    "reading /proc/cmdline (the host's boot line: addresses, ports, cloud tokens)",
    "the sandbox's own empty line; nothing of the host's",
)
def test_the_boot_command_line_is_the_sandbox_own(hostile_run: Observation, record_property):
    host = Path("/proc/cmdline").read_text().strip()
    for views in _views(hostile_run):
        assert views["cmdline"].strip() == "", views["cmdline"]
        assert not host or host not in views["cmdline"]
    record_property("observed", f"{hostile_run.kind}: /proc/cmdline empty")


@pytest.mark.reliability(
    "Sandbox",
    "reading /proc/meminfo for the host's memory use (a side channel on other runs)",
    "no use shown: free equals total, no cache, no swap",
)
def test_meminfo_shows_no_memory_use(hostile_run: Observation, record_property):
    for views in _views(hostile_run):
        meminfo = views["meminfo"]
        assert meminfo["MemFree"] == meminfo["MemAvailable"] == meminfo["MemTotal"], meminfo
        assert meminfo.get("Cached", 0) == meminfo.get("Dirty", 0) == 0, meminfo
    record_property("observed", f"{hostile_run.kind}: MemFree = MemTotal, no cache")


@pytest.mark.reliability(
    "Sandbox",
    "listing /sys/class/net and walking /sys for the host's network interfaces",
    "/sys/class/net does not exist; no interface anywhere under /sys",
)
def test_host_network_interfaces_are_hidden(hostile_run: Observation, record_property):
    for views in _views(hostile_run):
        assert str(views["/sys/class/net"]).startswith("error"), views["/sys/class/net"]
        assert views["interfaces"] == [], views["interfaces"]
    record_property("observed", f"{hostile_run.kind}: no /sys/class/net, no interface")


@pytest.mark.reliability(
    "Sandbox",
    "listing the cgroup tree (/sys/fs/cgroup), firmware tables and kernel settings under /sys",
    "none of them exists in the sandbox",
)
def test_cgroups_firmware_and_kernel_settings_are_hidden(hostile_run: Observation, record_property):
    for views in _views(hostile_run):
        for directory in ("/sys/fs/cgroup", "/sys/firmware", "/sys/kernel"):
            assert str(views[directory]).startswith("error"), (directory, views[directory])
    record_property("observed", f"{hostile_run.kind}: /sys/fs/cgroup, firmware, kernel: none")
