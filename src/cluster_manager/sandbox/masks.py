"""What the partial sandbox's user may reach of the host, judged by mode bits, and the tmpfs
masks that give it private directories and open the closed ones on its way to what it needs.
"""

from __future__ import annotations

from pathlib import Path

from cluster_manager.sandbox.namespaces import Mask
from cluster_manager.sandbox.spec import PRIVATE_DIRS
from cluster_manager.sandbox.view import outermost, under


def _may(path: str, uid: int, gid: int, bits: int) -> bool:
    """Mode bits only (as for a user that is neither root nor in any supplementary group)."""
    info = Path(path).stat()
    shift = 6 if info.st_uid == uid else 3 if info.st_gid == gid else 0
    return (info.st_mode >> shift) & bits == bits


def _blocked_ancestor(path: str, uid: int, gid: int) -> str | None:
    parts = Path(path).parts
    for depth in range(1, len(parts)):
        ancestor = str(Path(*parts[:depth]))
        if not _may(ancestor, uid, gid, 0o1):
            return ancestor
    return None


def _readable(path: str, uid: int, gid: int) -> bool:
    return _may(path, uid, gid, 0o5 if Path(path).is_dir() else 0o4)


# How deep a directory closed to the sandbox user is opened (a 0700 venv or `pip --target`
# folder holds open packages one level down).
OPEN_DEPTH = 3


def opened(paths: tuple[str, ...], uid: int, gid: int) -> tuple[str, ...]:
    """`paths` to bind for a sandbox user: a directory closed to it (say a `pip --target`
    folder made by `mktemp -d`, mode 0700) is bound child by child, and bubblewrap creates
    the directory itself, open (`bwrap._ancestors`). What is closed below that stays closed."""
    return outermost(p for path in paths for p in _opened(Path(path), uid, gid, OPEN_DEPTH))


def _opened(path: Path, uid: int, gid: int, depth: int) -> list[str]:
    try:
        closed = path.is_dir() and not path.is_symlink() and not _readable(str(path), uid, gid)
        if not closed or depth == 0:
            return [str(path)]
        children = sorted(path.iterdir())
    except OSError:
        return [str(path)]
    return [p for child in children for p in _opened(child, uid, gid, depth - 1)]


def reachable(paths: list[str], uid: int, gid: int) -> bool:
    return all(_blocked_ancestor(p, uid, gid) is None and _readable(p, uid, gid) for p in paths)


def plan_masks(paths: list[str], uid: int, gid: int, private_bytes: int) -> tuple[Mask, ...] | None:
    """Private dirs get an empty tmpfs; a closed directory on the way to a needed path (say a
    Python under /root) is replaced by one holding just that path. None: a path stays closed."""
    private = [str(Path(d).resolve()) for d in PRIVATE_DIRS if Path(d).is_dir()]
    keep: dict[str, set[str]] = {d: set() for d in private}
    for path in paths:
        anchor = next((d for d in private if under(path, d)), None)
        anchor = anchor or _blocked_ancestor(path, uid, gid)
        if anchor == path or not _readable(path, uid, gid):
            return None
        if anchor is not None:
            keep.setdefault(anchor, set()).add(path)
    return tuple(
        Mask(
            path=anchor,
            mode=0o1777 if anchor in private else 0o755,
            size_bytes=private_bytes if anchor in private else 1 << 20,
            keep=outermost(kept),
        )
        for anchor, kept in sorted(keep.items())
    )
