"""A fake Nsight Compute first on PATH (a pytest plugin: the `fake_ncu` fixture). The real
capture needs an NVIDIA GPU; this one lets profile mode run end to end on any machine, in the
sandbox too, and proves what each front end's filter became on ncu's command line."""

from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster_manager.harness import ncu

# Stands in for ncu: writes a report naming who ran it and, on its second line, the argv it
# was given (JSON); answers --import with a CSV, and otherwise runs the command after `--`,
# as ncu does.
FAKE_NCU = f"""#!{sys.executable}
import json, os, sys
args = sys.argv[1:]
if "--import" in args:
    print('"ID","Kernel Name","Section Name","Metric Name","Metric Value"')
    print('"0","custom_kernel","SOL","Duration","1.5"')
    sys.exit(0)
report = args[args.index("--export") + 1]
profiler = os.environ.get("{ncu.PROFILER_ENV}")
with open(report, "wb") as f:
    f.write(f"fake report uid={{os.getuid()}} profiler={{profiler}}\\n".encode())
    f.write(json.dumps(args).encode())
command = args[args.index("--") + 1:]
os.execv(command[0], command)
"""


def first_line(report: bytes) -> str:
    """Who ran the fake and under which profiler setting."""
    return report.decode().splitlines()[0]


def recorded_argv(report: bytes) -> list[str]:
    """The arguments the fake ncu was started with, from the report it wrote."""
    argv: list[str] = json.loads(report.decode().splitlines()[1])
    return argv


def option_values(argv: list[str]) -> dict[str, str]:
    """ncu's `--option value` pairs before the `--` that starts the wrapped command."""
    head = argv[: argv.index("--")]
    return {
        arg: head[i + 1]
        for i, arg in enumerate(head[:-1])
        if arg.startswith("--") and not head[i + 1].startswith("--")
    }


@pytest.fixture
def fake_ncu(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fake ncu first on PATH (for this process and every runner it starts), in a directory
    the sandbox user may read."""
    with tempfile.TemporaryDirectory(prefix="cm-fake-ncu-") as tmp:
        home = Path(tmp)
        home.chmod(0o755)
        (home / "bin").mkdir(mode=0o755)
        script = home / "bin" / "ncu"
        script.write_text(textwrap.dedent(FAKE_NCU), encoding="utf-8")
        script.chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
        monkeypatch.delenv(ncu.NCU_ENV, raising=False)
        monkeypatch.setenv("PATH", f"{home / 'bin'}{os.pathsep}{os.environ['PATH']}")
        yield script
