"""Teams on a leaderboard, for a user's token: create one, invite, join, leave, read. A team's
members rank as one entry; an invite-only leaderboard's teams are missing (404) to whoever
may not see the leaderboard, as everything of it is."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Request
from pydantic import StrictStr

from cluster_manager.api.auth import Private
from cluster_manager.api.models.teams import TeamCode, TeamLeft, TeamView
from cluster_manager.api.routes.popcorn import Authenticated, Viewer, service_of
from cluster_manager.service import NotFoundError

router = APIRouter(tags=["teams"])
NO_TEAM = "you are in no team on {leaderboard!r}"


@router.post("/leaderboards/{leaderboard}/teams", status_code=201)
async def create_team(
    leaderboard: str,
    request: Request,
    who: Authenticated,
    name: Annotated[StrictStr, Body(embed=True)],
) -> TeamView:
    """A new team on the leaderboard, the caller its first member."""
    team = await service_of(request).teams.create(leaderboard, name, who.require_user())
    return TeamView.of(team)


@router.get("/leaderboards/{leaderboard}/teams")
async def teams(leaderboard: str, request: Request, who: Viewer) -> list[TeamView]:
    """Every team with its members, as public as the ranking."""
    user, admin = (None, False) if who is None else (who.user, who.admin)
    found = await service_of(request).teams.all(leaderboard, user, include_closed=admin)
    return [TeamView.of(t) for t in found]


@router.get("/leaderboards/{leaderboard}/teams/mine")
async def my_team(leaderboard: str, request: Request, who: Authenticated) -> TeamView:
    team = await service_of(request).teams.of_user(leaderboard, who.require_user())
    if team is None:
        raise NotFoundError(NO_TEAM.format(leaderboard=leaderboard))
    return TeamView.of(team)


@router.post(
    "/leaderboards/{leaderboard}/teams/mine/invites", status_code=201, dependencies=[Private]
)
async def invite(leaderboard: str, request: Request, who: Authenticated) -> TeamCode:
    """A code that lets one more user join the caller's team (good once, while the caller
    stays in it); no cache keeps the answer."""
    code = await service_of(request).teams.invite(leaderboard, who.require_user())
    return TeamCode(leaderboard=leaderboard, code=code)


@router.post("/teams/join")
async def join(
    request: Request, who: Authenticated, code: Annotated[StrictStr, Body(embed=True)]
) -> TeamView:
    team = await service_of(request).teams.join(code, who.require_user())
    return TeamView.of(team)


@router.delete("/leaderboards/{leaderboard}/teams/mine")
async def leave(leaderboard: str, request: Request, who: Authenticated) -> TeamLeft:
    """The caller's ranked submissions rank as their own again."""
    left = await service_of(request).teams.leave(leaderboard, who.require_user())
    return TeamLeft(leaderboard=leaderboard, left=left)
