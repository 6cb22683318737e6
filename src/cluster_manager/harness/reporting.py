"""The result pipe of the built-in harness: popcorn protocol lines, one `key: value` each."""

from __future__ import annotations

import os

from cluster_manager.core import protocol
from cluster_manager.harness.outcome import Outcome


class Reporter:
    def __init__(self, fd: int) -> None:
        # No worker may hold the pipe: the zygote that forks them closes it, and no process
        # this one starts inherits it.
        os.set_inheritable(fd, False)
        self._file = os.fdopen(fd, "w", encoding="utf-8")

    def log(self, key: str, value: object) -> None:
        self._file.write(f"{key}: {protocol.escape_value(value)}\n")
        self._file.flush()

    def failure(self, prefix: str, outcome: Outcome) -> None:
        self.log(f"{prefix}.status", "fail")
        self.log(f"{prefix}.error", outcome.error or "failed")
        if outcome.verdict is not None:
            self.log(f"{prefix}.verdict", outcome.verdict.value)

    def close(self) -> None:
        self._file.close()
