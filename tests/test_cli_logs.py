"""The long-running commands' log (cli.logs): its settings, its JSON lines, what it hides."""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from cluster_manager.cli.common import cli
from cluster_manager.cli.logs import (
    HANDLER_NAME,
    JsonLineFormatter,
    RedactingFilter,
    TextFormatter,
    configure_logging,
)
from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.settings import Settings, load_settings

API_TOKEN = "cm_" + "Zz9-yY8_" * 4


def _record(message: str, *args: object, exc: BaseException | None = None) -> logging.LogRecord:
    exc_info = (type(exc), exc, exc.__traceback__) if exc is not None else None
    return logging.LogRecord(
        "cluster_manager.scheduling.driver", logging.ERROR, __file__, 1, message, args, exc_info
    )


def _raised(message: str) -> BaseException:
    try:
        raise RuntimeError(message)
    except RuntimeError as exc:
        return exc


def test_the_log_settings_are_read_and_a_bad_one_is_named():
    settings = load_settings(
        {"CLUSTER_MANAGER_LOG_LEVEL": "debug", "CLUSTER_MANAGER_LOG_FORMAT": "JSON"},
        dotenv_path=None,
    )
    assert (settings.log_level, settings.log_format) == (logging.DEBUG, "json")
    defaults = load_settings({}, dotenv_path=None)
    assert (defaults.log_level, defaults.log_format) == (logging.INFO, "text")
    assert defaults.keep_run_folders_hours == 0
    kept = load_settings({"CLUSTER_MANAGER_KEEP_RUN_FOLDERS_HOURS": "12"}, dotenv_path=None)
    assert kept.keep_run_folders_hours == 12
    with pytest.raises(ClusterManagerError, match="CLUSTER_MANAGER_LOG_FORMAT must be one of"):
        load_settings({"CLUSTER_MANAGER_LOG_FORMAT": "xml"}, dotenv_path=None)
    with pytest.raises(ClusterManagerError, match="CLUSTER_MANAGER_KEEP_RUN_FOLDERS_HOURS"):
        load_settings({"CLUSTER_MANAGER_KEEP_RUN_FOLDERS_HOURS": "-1"}, dotenv_path=None)


@pytest.mark.reliability(
    "Bad input",
    "a long-running command started with CLUSTER_MANAGER_LOG_LEVEL=LOUD",
    "exit code 2 and one line naming the variable and the levels it takes",
)
def test_a_bad_log_level_stops_the_command_naming_the_variable(record_property):
    done = CliRunner().invoke(cli, ["worker"], env={"CLUSTER_MANAGER_LOG_LEVEL": "LOUD"})
    record_property("observed", done.output.strip())
    assert done.exit_code == 2
    assert done.output.strip() == (
        "error: CLUSTER_MANAGER_LOG_LEVEL must be one of DEBUG, INFO, WARNING, ERROR, "
        "CRITICAL, got 'LOUD'"
    )


def test_a_json_line_holds_time_level_logger_message_and_the_exception_redacted():
    redactor = RedactingFilter(["the-admin-token"])
    record = _record("job %s failed", 7, exc=_raised(f"bad token {API_TOKEN} the-admin-token"))
    assert redactor.filter(record)
    line = JsonLineFormatter().format(record)
    assert "\n" not in line
    parsed = json.loads(line)
    assert parsed["level"] == "ERROR"
    assert parsed["logger"] == "cluster_manager.scheduling.driver"
    assert parsed["message"] == "job 7 failed"
    assert datetime.fromisoformat(parsed["time"]).utcoffset().total_seconds() == 0
    assert "RuntimeError: bad token cm_[redacted] [redacted]" in parsed["exception"]
    assert API_TOKEN not in line and "the-admin-token" not in line


def test_a_text_line_has_the_utc_time_level_logger_and_the_redacted_trace():
    record = _record("job %s failed", 7, exc=_raised(f"token {API_TOKEN}"))
    RedactingFilter([]).filter(record)
    text = TextFormatter().format(record)
    head, *trace = text.splitlines()
    stamp, level, logger, message = head.split(" ", 3)
    assert datetime.fromisoformat(stamp).utcoffset().total_seconds() == 0
    assert (level, logger, message) == (
        "ERROR",
        "cluster_manager.scheduling.driver:",
        "job 7 failed",
    )
    assert trace[-1] == "RuntimeError: token cm_[redacted]"


def test_configuring_twice_keeps_one_handler_and_quiets_chatty_libraries():
    root = logging.getLogger()
    saved = (root.level, list(root.handlers), logging.getLogger("httpx").level)
    stream = io.StringIO()
    settings = Settings(admin_token="the-admin-token", github_tokens=("ghp_secret",))
    try:
        configure_logging(settings, stream=stream)
        configure_logging(settings, stream=stream)
        ours = [h for h in root.handlers if h.get_name() == HANDLER_NAME]
        assert len(ours) == 1
        logging.getLogger("httpx").info("HTTP Request: GET https://api.github.com 200")
        logging.getLogger("cluster_manager.test").info("using ghp_secret as the-admin-token")
        logging.getLogger("httpx").warning("retrying GET https://api.github.com")
    finally:
        for handler in [h for h in root.handlers if h.get_name() == HANDLER_NAME]:
            root.removeHandler(handler)
        root.setLevel(saved[0])
        logging.getLogger("httpx").setLevel(saved[2])
    lines = stream.getvalue().splitlines()
    assert [line.split(" ", 2)[2] for line in lines] == [
        "cluster_manager.test: using [redacted] as [redacted]",
        "httpx: retrying GET https://api.github.com",
    ]


def test_a_worker_logs_json_lines_to_stderr(db_url: str, tmp_path: Path):
    log = tmp_path / "worker.log"
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "CLUSTER_MANAGER_DATA_DIR": str(tmp_path / "data"),
        "CLUSTER_MANAGER_LOG_FORMAT": "json",
    }
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "cluster_manager", "worker", "--poll", "0.2"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
    try:
        deadline = time.monotonic() + 60
        while "serving" not in log.read_text():
            assert worker.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0, log.read_text()
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    (started,) = [line for line in lines if "serving" in line["message"]]
    assert {"time", "level", "logger", "message"} <= started.keys()
    assert started["level"] == "INFO" and started["logger"] == "cluster_manager.cli.worker"
    assert started["message"].startswith("worker ") and started["message"].endswith(" serving CPU")
