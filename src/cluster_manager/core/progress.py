"""The runner's progress events: one JSON object a line on its stderr (`--progress`)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from cluster_manager.core.wording import counted

ProgressEvent = dict[str, Any]


def parse_events(text: str) -> list[ProgressEvent]:
    """The lines that are JSON objects, oldest first; anything else on stderr is skipped."""
    events = []
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if isinstance(event, dict):
                events.append(event)
    return events


def phase_started(event: ProgressEvent) -> str | None:
    """ "test: 3 cases" when the event says a phase began, else None."""
    if event.get("event") != "phase":
        return None
    cases = event.get("cases")
    count = counted(cases, "case") if isinstance(cases, int) else f"{cases} cases"
    return f"{event.get('phase')}: {count}"
