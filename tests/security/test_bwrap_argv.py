"""The bubblewrap command line built from a view: the order of its mounts decides what the
sandbox's user can reach."""

from __future__ import annotations

from cluster_manager.sandbox.bwrap import argv
from cluster_manager.sandbox.spec import SandboxSpec, View


def _positions(args: list[str], flag: str) -> dict[str, int]:
    return {args[i + 1]: i for i, a in enumerate(args) if a == flag}


def test_the_way_to_a_checkout_in_tmp_is_made_after_the_private_tmp():
    view = View(
        read_only=("/usr", "/tmp/clone/src", "/root/.pyenv/versions/3.11.7"),
        writable=("/tmp/cm-run-1/.home",),
    )
    args = argv(
        SandboxSpec(view, user=(70000, 70000)), bwrap="bwrap", setpriv="setpriv", as_root=True
    )
    dirs, tmpfs = _positions(args, "--dir"), _positions(args, "--tmpfs")
    binds = _positions(args, "--ro-bind")
    # bubblewrap would create these closed (0700): they are made 0755, inside the new /tmp.
    assert {"/tmp/clone", "/root", "/root/.pyenv", "/root/.pyenv/versions"} <= set(dirs)
    assert tmpfs["/tmp"] < dirs["/tmp/clone"] < binds["/tmp/clone/src"]
    assert "/tmp" not in dirs and "/usr" not in dirs
    assert args[args.index("--") + 1] == "setpriv"


def test_home_and_tmpdir_are_capped_tmpfs_mounted_over_the_read_only_run_directory():
    view = View(
        read_only=("/usr", "/tmp/cm-run-1"),
        scratch=("/tmp/cm-run-1/.home", "/tmp/cm-run-1/.tmp"),
        private_bytes=100 << 20,
    )
    args = argv(SandboxSpec(view), bwrap="bwrap", setpriv=None, as_root=False)
    tmpfs, binds = _positions(args, "--tmpfs"), _positions(args, "--ro-bind")
    for path in ("/tmp/cm-run-1/.home", "/tmp/cm-run-1/.tmp", "/tmp", "/dev/shm"):
        assert args[tmpfs[path] - 1] == str(100 << 20), path  # --size N --tmpfs PATH
    assert binds["/tmp/cm-run-1"] < tmpfs["/tmp/cm-run-1/.home"]
    assert "/tmp/cm-run-1/.home" not in _positions(args, "--bind")


def test_the_root_and_dev_are_read_only_once_everything_is_mounted():
    # bubblewrap's root and /dev are tmpfs mounts without a size, which on an ordinary user's
    # runner the tree's user owns: left writable, each could take half the host's memory.
    view = View(
        read_only=("/usr", "/tmp/cm-run-1"),
        scratch=("/tmp/cm-run-1/.home",),
        masked=("/usr/share",),
        devices=(("/dev/dri/renderD128", "/dev/dri/renderD128"),),
        symlinks=(("/lib", "usr/lib"),),
    )
    for as_root in (False, True):
        args = argv(SandboxSpec(view, user=(7, 7)), bwrap="bwrap", setpriv="sp", as_root=as_root)
        end = args.index("--")
        mounts = ("--tmpfs", "--bind", "--ro-bind", "--dev-bind", "--dir", "--dev", "--symlink")
        last_mount = max(i for i, a in enumerate(args[:end]) if a in mounts)
        remounted = {args[i + 1]: i for i, a in enumerate(args[:end]) if a == "--remount-ro"}
        assert remounted.get("/dev", -1) > last_mount and remounted.get("/", -1) > last_mount
