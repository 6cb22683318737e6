"""The user's runtime directory, for the embedded Postgres in sessions that have none.

pgserver keeps its lock file (and, when the data directory's path is too long for a unix
socket, the socket) in the user's runtime directory, which it asks platformdirs for when it is
imported. Without XDG_RUNTIME_DIR (a root shell, a container, cron, CI) platformdirs warns and
falls back on its own; we name a runtime directory first, as a login session would.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import MutableMapping
from pathlib import Path

RUNTIME_ENV = "XDG_RUNTIME_DIR"


def _private(path: Path, uid: int) -> bool:
    """What the XDG spec asks of a runtime directory: a real directory of the user, mode 0700."""
    try:
        info = path.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == uid and info.st_mode & 0o777 == 0o700


def ensure_runtime_dir(environ: MutableMapping[str, str] = os.environ) -> None:
    """Sets XDG_RUNTIME_DIR when it is unset: the session's /run/user/<uid> if there is one,
    else a private directory of ours in the temporary directory. Not platformdirs' own fallback
    there (`runtime-<uid>`): pgserver's lock creates that one with mode 0755, which platformdirs
    then refuses as a runtime directory. A value already set is left alone: if it is unfit,
    platformdirs says why."""
    if environ.get(RUNTIME_ENV):
        return
    uid = os.geteuid()
    session = Path(f"/run/user/{uid}")  # logind's, made at login; never made here
    if _private(session, uid):
        environ[RUNTIME_ENV] = str(session)
        return
    ours = Path(tempfile.gettempdir()) / f"cluster-manager-{uid}"
    with contextlib.suppress(OSError):  # then platformdirs falls back on its own, and warns
        ours.mkdir(mode=0o700, exist_ok=True)
    if _private(ours, uid):  # not another user's, not a symlink
        environ[RUNTIME_ENV] = str(ours)
