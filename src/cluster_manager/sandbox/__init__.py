"""What a submission may see and do, and the code that applies it on every launcher, as root or
as an ordinary user (docs/SECURITY.md).

    spec.py        the one declarative description: files, devices, network, processes, user
    plan.py        one run's sandbox: the full one where the machine allows it, else what it can
    view.py        what the full sandbox shows of the host, and its own /etc and /proc files
    masks.py       what the partial sandbox's user may reach, and the tmpfs masks over the rest
    bwrap.py       the spec applied with bubblewrap
    namespaces.py  the in-process isolation set up between fork and exec
    seccomp.py     the syscall filter bubblewrap loads
    cgroups.py     a cgroup for each process tree: memory, swap and processes as one
    gpu_nodes.py   the GPU device nodes shown: all, or only the runner's own GPUs'
    process.py     one untrusted process tree with a timeout, capped output and limits
    lifecycle.py   nothing a submission started outlives its run
"""
