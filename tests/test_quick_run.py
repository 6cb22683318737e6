"""Quick script runs through a real launcher (local), and their input checks."""

from __future__ import annotations

import pytest

from cluster_manager.core.models import Limits, Verdict
from cluster_manager.errors import InvalidSubmissionError, LauncherError
from cluster_manager.gpus import GpuRegistry, GpuType
from cluster_manager.launchers.local import LocalLauncher
from cluster_manager.quick_run import run_script, script_request

REGISTRY = GpuRegistry(
    {"CPU": GpuType("CPU", "local"), "H100": GpuType("H100", "modal", params={"modal_gpu": "H100"})}
)


async def test_a_script_runs_and_its_output_comes_back(tmp_path):
    request = script_request("hello.py", b"print('hi there')\n", timeout_s=20, limits=Limits())
    result = await run_script(REGISTRY, {"local": LocalLauncher(tmp_path)}, "CPU", request)
    assert result.verdict is Verdict.PASSED
    assert "hi there" in result.phases[0].stdout


@pytest.mark.reliability(
    "Faults",
    "a quick run on a GPU type whose launcher is not configured in this process",
    "a clear LauncherError naming the missing launcher; nothing runs",
)
async def test_a_gpu_without_its_launcher_is_a_clear_error(tmp_path, record_property):
    request = script_request("x.py", b"print(1)\n", timeout_s=5, limits=Limits())
    with pytest.raises(LauncherError, match="no modal launcher for H100") as raised:
        await run_script(REGISTRY, {"local": LocalLauncher(tmp_path)}, "H100", request)
    record_property("observed", str(raised.value))


@pytest.mark.parametrize(
    ("name", "data", "timeout", "message"),
    [
        ("x.cu", b"int main(){}", 5, "takes a Python file"),
        ("x.py", b"  \n", 5, "the file is empty"),
        ("x.py", b"\xff\xfe", 5, "not UTF-8"),
        ("x.py", b"print(1)", 0, "time limit"),
        ("x.py", b"print(1)", 500, "time limit"),
    ],
)
def test_bad_scripts_are_refused(name, data, timeout, message):
    with pytest.raises(InvalidSubmissionError, match=message):
        script_request(name, data, timeout_s=timeout, limits=Limits())
