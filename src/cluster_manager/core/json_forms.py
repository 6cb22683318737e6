"""The plain-JSON form of the engine's records: what travels between the bot host, the
launchers and the runner, and what is stored."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any


def plain_json(obj: Any) -> Any:
    """Dataclasses -> dicts, enums -> values, tuples -> lists; plain JSON all the way down."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: plain_json(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, list | tuple):
        return [plain_json(v) for v in obj]
    if isinstance(obj, dict):
        return {k: plain_json(v) for k, v in obj.items()}
    return obj
