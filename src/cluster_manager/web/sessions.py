"""Signing in to the pages with an API token, and out. The browser keeps only a session id:
HttpOnly, SameSite=Strict, and Secure whenever the request came over HTTPS (as seen behind a
proxy that says so with X-Forwarded-Proto)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse

from cluster_manager.api.auth import SESSION_COOKIE
from cluster_manager.service import RateLimitedError, UnauthorizedError
from cluster_manager.service.sessions import SESSION_LIFETIME
from cluster_manager.web.rendering import PageRoute, check_same_origin, render, service_of

router = APIRouter(include_in_schema=False, route_class=PageRoute)


def local_path(target: str) -> str:
    """Where to go after signing in: a path on this site only (never `//elsewhere`)."""
    if target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/"


@router.get("/login")
async def login_form(request: Request) -> Response:
    return await render(
        request, "login.html", next=local_path(request.query_params.get("next", "/"))
    )


@router.post("/login")
async def login(request: Request) -> Response:
    check_same_origin(request)
    form = await request.form()
    token, target = str(form.get("token", "")), local_path(str(form.get("next", "/")))
    service = service_of(request)
    try:
        # Per address: guessing tokens, or opening sessions by the hundred, is slow going.
        request.app.state.login_limiter.hit(request.client.host if request.client else "")
        session_id = await service.sessions.open(token, admin_token=request.app.state.admin_token)
    except RateLimitedError as exc:
        return await render(request, "login.html", 429, next=target, error=str(exc))
    except UnauthorizedError as exc:
        return await render(request, "login.html", 401, next=target, error=str(exc))
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        session_id,
        max_age=int(SESSION_LIFETIME.total_seconds()),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    check_same_origin(request)
    session_id = request.cookies.get(SESSION_COOKIE)
    if session_id:
        await service_of(request).sessions.close(session_id)
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(SESSION_COOKIE, httponly=True, samesite="strict")
    return response
