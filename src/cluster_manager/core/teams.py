"""Teams: a name on one leaderboard and its members, who rank as one entry."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cluster_manager.core.records import InvalidNameError

MAX_TEAM_NAME = 40
MAX_TEAM_SIZE = 100
# ASCII letters, digits and a few separators, as written: nothing that reads as another name.
TEAM_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9 _.-]*[A-Za-z0-9_.-])?")


def check_team_name(name: str) -> str:
    if len(name) > MAX_TEAM_NAME:
        raise InvalidNameError(
            f"a team name is at most {MAX_TEAM_NAME} characters, not {len(name)}"
        )
    if not TEAM_NAME.fullmatch(name):
        raise InvalidNameError(
            f"team name {name!r} may only hold ASCII letters, digits, spaces, '_', '.' and '-', "
            "starting with a letter or digit and not ending with a space"
        )
    return name


@dataclass(frozen=True)
class Team:
    leaderboard: str
    name: str
    members: tuple[str, ...]  # users' external ids, in the order they joined
    created_at: datetime
    size_limit: int  # the leaderboard's `team_size` when read

    def to_json(self) -> dict[str, Any]:
        return {
            "leaderboard": self.leaderboard,
            "name": self.name,
            "members": list(self.members),
            "created_at": self.created_at.isoformat(),
            "size_limit": self.size_limit,
        }
