"""The teams of a leaderboard on a page of their own, and the leaderboard page's team forms:
create a team, make an invite code, join with one, leave. Each is the same service call as
every front end, under the submit form's rules: our own pages' posts only, a signed-in user
(not the admin), refusals as pages saying why."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse

from cluster_manager.api.auth import signed_in
from cluster_manager.service import PermissionDeniedError, Submitter
from cluster_manager.web.pages import leaderboard_page, page_of
from cluster_manager.web.rendering import (
    BrowserRoute,
    PageRoute,
    check_same_origin,
    render,
    service_of,
    visible_board,
)
from cluster_manager.web.view_models import team_view

router = APIRouter(include_in_schema=False, route_class=PageRoute)
# Shares `/leaderboards/{name}/teams` with the JSON list: answers browsers only.
browser_router = APIRouter(include_in_schema=False, route_class=BrowserRoute)
TEAMS = "#teams"  # the page's Teams section


async def acting_user(request: Request, name: str) -> Submitter | Response:
    """Who posts the form, or the answer to a post nobody may make."""
    check_same_origin(request)
    viewer = await signed_in(request)
    if viewer is None:
        target = "/leaderboards/" + quote(name, safe="")
        return RedirectResponse(f"/login?next={quote(target)}", status_code=303)
    if viewer.user is None:
        raise PermissionDeniedError("the admin acts for no user: sign in with a user's token")
    return viewer.user


async def back_to_teams(request: Request, name: str) -> Response:
    board = await visible_board(request, name)
    return RedirectResponse(page_of(board) + TEAMS, status_code=303)


async def form_field(request: Request, field: str) -> str:
    form = await request.form()
    return str(form.get(field, "")).strip()


@browser_router.get("/leaderboards/{name}/teams")
async def teams_page(name: str, request: Request) -> Response:
    """Every team of the leaderboard with its members, by name."""
    board = await visible_board(request, name)
    viewer = await signed_in(request)
    user, admin = (None, False) if viewer is None else (viewer.user, viewer.admin)
    teams = await service_of(request).teams.all(board.name, user, include_closed=admin)
    return await render(
        request,
        "teams.html",
        board=board,
        board_page=page_of(board),
        teams=[team_view(t, user) for t in teams],
    )


@router.post("/leaderboards/{name}/team/create")
async def create_team(name: str, request: Request) -> Response:
    user = await acting_user(request, name)
    if isinstance(user, Response):
        return user
    await service_of(request).teams.create(name, await form_field(request, "name"), user)
    return await back_to_teams(request, name)


@router.post("/leaderboards/{name}/team/invite")
async def team_invite(name: str, request: Request) -> Response:
    """Answered with the leaderboard's page, which shows the new code this once (a redirect
    would have to carry it in the address)."""
    user = await acting_user(request, name)
    if isinstance(user, Response):
        return user
    code = await service_of(request).teams.invite(name, user)
    return await leaderboard_page(request, name, invite_code=code)


@router.post("/leaderboards/{name}/team/join")
async def join_team(name: str, request: Request) -> Response:
    user = await acting_user(request, name)
    if isinstance(user, Response):
        return user
    await visible_board(request, name)
    # The code names its team, and so its leaderboard: the answer is that leaderboard's page.
    team = await service_of(request).teams.join(await form_field(request, "code"), user)
    return RedirectResponse("/leaderboards/" + quote(team.leaderboard, safe="") + TEAMS, 303)


@router.post("/leaderboards/{name}/team/leave")
async def leave_team(name: str, request: Request) -> Response:
    user = await acting_user(request, name)
    if isinstance(user, Response):
        return user
    await service_of(request).teams.leave(name, user)
    return await back_to_teams(request, name)
