"""How pages are answered: the templates, the headers every page carries, the routes that
render refusals as pages, and which requests a page (not JSON) answers."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.routing import APIRoute
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.routing import Match
from starlette.types import Scope

from cluster_manager.api.auth import signed_in
from cluster_manager.api.error_handlers import answer_of
from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.core.records import Leaderboard
from cluster_manager.service import PermissionDeniedError, Service, UnauthorizedError
from cluster_manager.web import marks

HERE = Path(__file__).resolve().parent
templates = Environment(
    loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(), auto_reload=False
)
templates.globals.update(mark=marks.mark, mark_for=marks.mark_for)
templates.filters["with_marks"] = marks.with_marks
# Pages load only their own stylesheet, script and images; nothing is inlined, so a name or
# a file shown on a page can never run as script even if escaping were missed somewhere.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; script-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
TITLES = {
    400: "Bad request",
    401: "Sign in",
    403: "Not allowed",
    404: "Not found",
    409: "Busy",
    503: "Paused",
}


def service_of(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


async def visible_board(request: Request, name: str) -> Leaderboard:
    """The leaderboard, if whoever is signed in may see it; else 404 as for a missing one."""
    viewer = await signed_in(request)
    user, admin = (None, False) if viewer is None else (viewer.user, viewer.admin)
    return await service_of(request).leaderboards.visible(name, user, include_closed=admin)


async def render(request: Request, template: str, status: int = 200, **context: Any) -> Response:
    """The template as a page, with who is signed in for the header."""
    viewer = await signed_in(request)
    html = templates.get_template(template).render(viewer=viewer, path=request.url.path, **context)
    return HTMLResponse(html, status_code=status)


def keep_private(page: Response) -> Response:
    """A page with a secret (a one-time code, a user's own submissions or code): no browser
    cache or proxy keeps a copy for the next person at that machine to read."""
    page.headers["Cache-Control"] = "no-store"
    return page


async def error_page(request: Request, status: int, message: str) -> Response:
    title = TITLES.get(status, "Refused" if status < 500 else "Error")
    return await render(request, "error.html", status, title=title, message=message)


def check_same_origin(request: Request) -> None:
    """A form post must come from our own pages (the cookie's SameSite=Strict already keeps
    other sites' posts signed out; this also refuses them outright)."""
    origin = request.headers.get("origin")
    if origin is not None and origin != f"{request.url.scheme}://{request.url.netloc}":
        raise PermissionDeniedError("forms are only taken from this site's own pages")


def login_redirect(request: Request) -> Response:
    return RedirectResponse(f"/login?next={quote(request.url.path)}", status_code=303)


Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class PageRoute(APIRoute):
    """A route answered with HTML: a refusal becomes a page with its status (a sign-in one
    redirects to /login), and every answer carries the security headers."""

    def get_route_handler(self) -> Handler:
        handler = super().get_route_handler()

        async def page_handler(request: Request) -> Response:
            try:
                response = await handler(request)
            except UnauthorizedError:
                response = login_redirect(request)
            except ClusterManagerError as exc:
                response = await error_page(request, *answer_of(request, exc))
            except RequestValidationError:
                response = await error_page(request, 404, "there is no such page")
            response.headers.update(SECURITY_HEADERS)
            response.headers["Vary"] = "Accept, Cookie"
            return response

        return page_handler


class BrowserRoute(PageRoute):
    """A page sharing its path with a JSON endpoint: it answers only a client that prefers
    HTML (a browser); others reach the endpoint registered after it."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        if match is Match.NONE:
            return match, child
        accept = dict(scope.get("headers", ())).get(b"accept", b"").decode("latin-1")
        return (match, child) if prefers_html(accept) else (Match.NONE, {})


def prefers_html(accept: str) -> bool:
    """Whether an Accept header asks for HTML over JSON; wildcards ask for neither."""
    weights: dict[str, float] = {}
    for item in accept.split(","):
        kind, *params = (part.strip() for part in item.split(";"))
        quality = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        weights[kind.lower()] = max(weights.get(kind.lower(), 0.0), quality)
    html = max(weights.get("text/html", 0.0), weights.get("application/xhtml+xml", 0.0))
    return html > 0 and html >= weights.get("application/json", 0.0)
