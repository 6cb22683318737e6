"""Files and deadlines a user may hand over by mistake, or on purpose: each is refused at
once with a clear message, or accepted as the user meant it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cluster_manager.core.models import Language
from cluster_manager.core.submission import UTF8_BOM, validate_submission
from cluster_manager.service import InvalidDeadlineError, parse_deadline
from tests.conftest import CORRECT, EXAMPLES

CLI_TIMEOUT_S = 60


def _eval(submission: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "cluster_manager",
            "eval",
            str(EXAMPLES / "identity_py"),
            submission,
        ],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )


@pytest.mark.reliability(
    "Bad input",
    "`eval TASK /dev/zero`: a submission that never ends",
    "refused at once as not a regular file; nothing read",
)
def test_an_endless_device_is_refused_without_reading_it(record_property):
    done = _eval("/dev/zero")
    assert done.returncode != 0
    assert "/dev/zero: not a regular file" in done.stderr
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    record_property("observed", done.stderr.strip().splitlines()[-1])


@pytest.mark.reliability(
    "Bad input",
    "`eval TASK FIFO`: a named pipe nobody writes to",
    "refused at once as not a regular file; the command does not hang",
)
def test_a_fifo_is_refused_without_waiting_for_it(tmp_path: Path, record_property):
    fifo = tmp_path / "submission.py"
    os.mkfifo(fifo)  # nobody ever writes: a command that opened it plainly would wait forever
    done = _eval(str(fifo))
    assert done.returncode != 0
    assert "not a regular file" in done.stderr
    record_property("observed", done.stderr.strip().splitlines()[-1])


def test_an_oversized_file_is_refused_by_its_size(tmp_path: Path):
    big = tmp_path / "submission.py"
    big.write_bytes(b"#" * (1 << 20))
    done = _eval(str(big))
    assert done.returncode != 0
    assert (
        f"{big} is 1 MiB, over the 256 KiB limit for a submission" in done.stderr
    )  # its size, readable


@pytest.mark.reliability(
    "Bad input",
    "a submission saved with a UTF-8 byte-order mark (as some Windows editors do)",
    "accepted: the mark is dropped and the code runs as written",
)
def test_a_byte_order_mark_is_dropped(record_property):
    submission = validate_submission("s.py", UTF8_BOM + CORRECT.encode(), Language.PYTHON)
    assert submission.code == CORRECT
    record_property("observed", "accepted, code without the mark")


@pytest.mark.reliability(
    "Bad input",
    "a deadline of 9999-12-31T23:59:59-23:59 (past what a timestamp can hold in UTC)",
    "refused with the latest deadline named, not a database overflow",
)
def test_a_deadline_past_what_a_timestamp_holds_is_refused(record_property):
    with pytest.raises(InvalidDeadlineError, match="too far away") as info:
        parse_deadline("9999-12-31T23:59:59-23:59")
    assert parse_deadline("9998-12-31T00:00:00+00:00").year == 9998
    record_property("observed", str(info.value))
