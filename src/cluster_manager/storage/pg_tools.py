"""Postgres's own client programs (pg_dump, pg_restore): where they are, which suit a server,
and how one is run on a database without its password on a command line."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from psycopg import ProgrammingError
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from cluster_manager.storage.database import DatabaseError
from cluster_manager.storage.runtime_dir import ensure_runtime_dir

# Debian and Ubuntu install each major version's programs side by side here.
_DEBIAN_VERSIONS = Path("/usr/lib/postgresql")
_VERSION = re.compile(r"\(PostgreSQL\)\s+(\d+)(?:\.\d+)*")


class PgToolError(DatabaseError):
    """No suitable program, or one that failed: the message says which and why."""


@dataclass(frozen=True)
class PgTool:
    path: Path
    major: int
    # As `--version` prints it after the program's name: "16.2", "15.20 (Debian 15.20-0+deb12u1)".
    version: str

    def describe(self) -> str:
        return f"{self.version} at {self.path}"


def tool_folders(chosen: Path | None) -> list[Path]:
    """Where to look: only `chosen` when the operator named a folder; else the embedded
    Postgres's own programs (they match its server), every version Debian installed, then
    whatever is on PATH."""
    if chosen is not None:
        return [chosen]
    folders = [_embedded_bin()]
    folders += sorted(_DEBIAN_VERSIONS.glob("*/bin"))
    folders += [Path(found).parent for found in (shutil.which("pg_dump"),) if found]
    return [folder for folder in folders if folder.is_dir()]


def _embedded_bin() -> Path:
    ensure_runtime_dir()  # pgserver asks for its runtime directory when imported
    import pgserver

    return Path(pgserver.__file__).parent / "pginstall" / "bin"


def found_tools(name: str, folders: list[Path]) -> list[PgTool]:
    """Each distinct `name` program in `folders` that says its version."""
    tools: list[PgTool] = []
    seen: set[Path] = set()
    for folder in folders:
        path = folder / name
        if not path.is_file() or path.resolve() in seen:
            continue
        seen.add(path.resolve())
        try:
            said = subprocess.run(
                [str(path), "--version"], capture_output=True, text=True, timeout=30
            ).stdout
        except OSError:
            continue
        if match := _VERSION.search(said):
            tools.append(PgTool(path, int(match.group(1)), said.split(")", 1)[1].strip()))
    return tools


def tools_for_server(name: str, server_major: int, folders: list[Path]) -> list[PgTool]:
    """The `name` programs that can work with a server of `server_major`, best first: its own
    version, then newer ones, oldest first (pg_dump refuses a server newer than itself)."""
    found = found_tools(name, folders)
    usable = sorted(
        (tool for tool in found if tool.major >= server_major),
        key=lambda tool: (tool.major != server_major, tool.major),
    )
    if not usable:
        seen = "; ".join(tool.describe() for tool in found) or "none"
        raise PgToolError(
            f"the database server runs PostgreSQL {server_major} and no {name} here is that "
            f"new (found: {seen}): {name} cannot work with a server newer than itself. Install "
            f"PostgreSQL {server_major}'s client programs (Debian and Ubuntu: "
            f"postgresql-client-{server_major}), or name their folder with --pg-bin"
        )
    return usable


@dataclass(frozen=True)
class Connection:
    """A database as a client program takes it: `conninfo` for its command line (no secret
    in it) and `env` for its environment (the password)."""

    conninfo: str
    env: dict[str, str]


def connection(url: str) -> Connection:
    try:
        params = conninfo_to_dict(url)
    except ProgrammingError as exc:
        raise PgToolError(f"cannot read the database's address: {exc}") from exc
    if params.pop("sslpassword", None):
        raise PgToolError(
            "the database's address holds an sslpassword, which no client program can be "
            "given without a command line: use a key without a passphrase for backups"
        )
    password = params.pop("password", None)
    return Connection(
        make_conninfo(**{k: str(v) for k, v in params.items()}),
        {"PGPASSWORD": str(password)} if password else {},
    )


def run_tool(
    tool: PgTool, args: list[str], *, database: Connection | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Runs `tool` with `args` (and `--dbname` for `database`), never asking for a password
    (`--no-password`: a prompt would wait for ever). Its output is the caller's to read."""
    argv = [str(tool.path), *args]
    env = dict(os.environ)
    if database is not None:
        argv += ["--no-password", f"--dbname={database.conninfo}"]
        env.update(database.env)
    try:
        return subprocess.run(argv, capture_output=True, env=env, check=False)
    except OSError as exc:
        raise PgToolError(f"cannot run {tool.path}: {exc}") from exc


def error_lines(done: subprocess.CompletedProcess[bytes], limit: int = 5) -> str:
    """The last lines a failed program wrote on its standard error, as one line."""
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return " / ".join(lines[-limit:]) or f"exit status {done.returncode}"
