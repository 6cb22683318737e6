"""What a submission may see and do: one declarative description, applied on every launcher.

A `SandboxSpec` lists the filesystem the submission's process tree gets (everything else of the
host does not exist for it), the devices, the network and the user it runs as. `bwrap.argv`
turns it into a bubblewrap command line; the same spec serves a root runner and an ordinary
user's (GitHub, Slurm), which differ only in how the user is set.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Private, empty and writable: each run gets its own.
PRIVATE_DIRS = ("/tmp", "/var/tmp", "/dev/shm")  # noqa: S108 - replaced by empty tmpfs
# The toolchain of a merged-/usr system: symlinks on Debian 12 and Ubuntu, directories elsewhere.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt/rocm")
# What the dynamic loader, Python, the compilers and the GPU drivers read from /etc; nothing else
# of /etc (ssh keys, credentials, machine configuration) is visible.
ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/os-release",
    "/etc/OpenCL",
)
# Read-only kernel views (globs), what the runtimes read of /sys and no more: not the host's
# network interfaces, its cgroup tree, firmware tables (DMI serials) or kernel settings.
KERNEL_VIEWS = (
    "/sys/devices/system/cpu",  # topology: glibc's CPU count, OpenMP, torch's thread pools
    "/sys/devices/system/node",  # NUMA nodes: CUDA, ROCm and hwloc place memory by them
    "/sys/devices/pci*",  # the PCI devices the links below lead to (a GPU's node, resources)
    "/sys/devices/virtual/kfd",  # ROCm's topology, where /sys/class/kfd leads
    "/sys/bus/pci",  # NVML and ROCm enumerate GPUs here
    "/sys/class/drm",  # render nodes and their devices (libdrm, ROCm)
    "/sys/class/kfd",
    "/sys/dev/char",  # libdrm: from a device number to its device
    "/sys/module/nvidia*",  # driver versions and parameters
    "/sys/module/amdgpu",
)
# Host-wide /proc files shown as the sandbox's own copies: the boot command line (host
# addresses, tokens of some clouds) and memory use (a side channel on other runs).
PROC_FILES = ("/proc/cmdline", "/proc/meminfo")


@dataclass(frozen=True)
class View:
    """The filesystem of the sandbox. Paths are the host's and appear at the same place."""

    read_only: tuple[str, ...] = ()
    writable: tuple[str, ...] = ()
    devices: tuple[tuple[str, str], ...] = ()  # (path in the sandbox, host node shown there)
    private: tuple[str, ...] = PRIVATE_DIRS
    symlinks: tuple[tuple[str, str], ...] = ()  # (path, what it points to)
    files: tuple[tuple[str, str], ...] = ()  # (path in the sandbox, host file shown there)
    private_bytes: int = 1 << 30  # size cap of each private directory
    # Host directories (the run's HOME and TMPDIR) replaced by an empty tmpfs of
    # `private_bytes` each: nothing written there reaches the host's disk.
    scratch: tuple[str, ...] = ()
    # Directories inside the read-only binds hidden behind an empty read-only tmpfs (the host's
    # network interfaces under the PCI devices).
    masked: tuple[str, ...] = ()


@dataclass(frozen=True)
class SandboxSpec:
    view: View
    # (uid, gid) the tree switches to inside the sandbox: a root runner's own id for this run.
    # None: the runner's user stays, inside a user namespace of its own.
    user: tuple[int, int] | None = None
    groups: tuple[int, ...] = ()  # supplementary groups of `user` (GPU device nodes)
    network: str = "loopback"  # a network namespace with only loopback
    processes: str = "own"  # a PID namespace: only the tree's own processes exist
    hostname: str = "sandbox"
    notes: tuple[str, ...] = field(default=())  # what the machine could not grant

    def grants(self) -> dict[str, str]:
        """A short account of the sandbox for RunResult.system."""
        return {
            "filesystem": "private",
            "network": "isolated",
            "processes": "own",
            "user": "runner" if self.user is None else f"uid {self.user[0]}",
        }
