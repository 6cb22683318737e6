"""Resource limits from the request (the GPU registry's `limits:`) reach the task's processes."""

from __future__ import annotations

import pytest

from cluster_manager.core.models import Limits, Verdict
from tests.conftest import run_code

pytestmark = pytest.mark.slow


@pytest.mark.reliability(
    "Sandbox",
    "writing a 4 MiB file under a 1 MiB file-size limit",
    "runtime_error: the write fails with EFBIG or SIGXFSZ",
)
def test_file_size_limit_stops_a_large_write(identity_task, record_property):
    code = """
    import os
    def custom_kernel(data):
        with open(os.path.join(os.environ["TMPDIR"], "big.bin"), "wb") as fh:
            fh.write(b"x" * (4 << 20))
        return data.clone()
    """
    result = run_code(identity_task, code, limits=Limits(file_bytes=1 << 20))
    record_property("observed", f"{result.verdict.value}: {result.message}")
    assert result.verdict is Verdict.RUNTIME_ERROR, result.message


@pytest.mark.reliability(
    "Sandbox",
    "opening 200 files under a 64 open-files limit",
    "runtime_error naming 'Too many open files'",
)
def test_open_files_limit_stops_a_descriptor_hoard(identity_task, record_property):
    code = """
    import os
    def custom_kernel(data):
        held = [open(os.devnull) for _ in range(200)]
        return data.clone()
    """
    result = run_code(identity_task, code, limits=Limits(open_files=64))
    record_property("observed", f"{result.verdict.value}: {result.message}")
    assert result.verdict is Verdict.RUNTIME_ERROR, result.message
    assert "Too many open files" in result.message


def test_limits_that_fit_leave_an_honest_kernel_alone(identity_task):
    limits = Limits(file_bytes=1 << 20, open_files=256)
    result = run_code(
        identity_task, "def custom_kernel(data):\n    return data.clone()\n", limits=limits
    )
    assert result.passed, result.message
