"""Teams as the API shows them: a team with its members, a code to join one, a team left."""

from __future__ import annotations

from cluster_manager.api.models.base import ApiModel, Moment
from cluster_manager.core.teams import Team


class TeamView(ApiModel):
    leaderboard: str
    name: str
    members: list[str]  # users' ids, in the order they joined
    created_at: Moment
    size_limit: int  # the leaderboard's `team_size` when read

    @classmethod
    def of(cls, team: Team) -> TeamView:
        return cls(
            leaderboard=team.leaderboard,
            name=team.name,
            members=list(team.members),
            created_at=team.created_at,
            size_limit=team.size_limit,
        )

    def to_record(self) -> Team:
        return Team(
            self.leaderboard, self.name, tuple(self.members), self.created_at, self.size_limit
        )


class TeamCode(ApiModel):
    """A code that lets one more user join the caller's team (good once)."""

    leaderboard: str
    code: str


class TeamLeft(ApiModel):
    leaderboard: str
    left: str  # the team's name
