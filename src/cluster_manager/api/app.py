"""The ASGI app over an open `App`: routes, error answers, body limits, the token limiter,
request timing for /metrics."""

from __future__ import annotations

from fastapi import FastAPI

from cluster_manager.api import error_handlers, metrics
from cluster_manager.api.auth import RequestLimiter
from cluster_manager.api.request_timing import RequestTiming
from cluster_manager.api.routes import admin, native, popcorn
from cluster_manager.api.routes import teams as team_routes
from cluster_manager.api.streams import STATUS_INTERVAL_S, OpenStreams
from cluster_manager.api.uploads import MAX_BODY_BYTES, BodyLimit
from cluster_manager.rendering.charts import ChartCache
from cluster_manager.service import Service
from cluster_manager.settings import Settings
from cluster_manager.web import api_docs, pages, sessions, submissions
from cluster_manager.web import teams as team_forms

API_VERSION = "1"


# Sign-ins one address may try per minute: people type a token once; scripts use the API.
LOGIN_ATTEMPTS_PER_MINUTE = 10


def create_api(service: Service, settings: Settings) -> FastAPI:
    api = FastAPI(
        title="cluster-manager",
        version=API_VERSION,
        description="Submit kernels, follow them live, read rankings. popcorn-cli compatible.",
        # `/docs` is our own page (web/api_docs.py), not Swagger UI's, which loads from a CDN.
        docs_url=None,
        redoc_url=None,
    )
    api.state.service = service
    api.state.admin_token = settings.admin_token
    api.state.limiter = RequestLimiter(settings.api_rate_limit_per_minute)
    api.state.login_limiter = RequestLimiter(
        LOGIN_ATTEMPTS_PER_MINUTE, "sign-in attempts per minute from this address"
    )
    api.state.status_interval_s = STATUS_INTERVAL_S
    api.state.streams = OpenStreams()
    api.state.charts = ChartCache()
    api.state.metrics = metrics.MetricsEndpoint(settings.metrics_enabled, settings.metrics_token)
    error_handlers.install(api)
    api.include_router(metrics.router)
    # Pages and the native routes before popcorn's catch-all `/{lb}/{gpu}/{mode}`; a browser's
    # request for `/leaderboards/{name}` (or `.../teams`) gets the page, any other client the
    # JSON.
    api.include_router(pages.router)
    api.include_router(pages.browser_router)
    api.include_router(sessions.router)
    api.include_router(submissions.router)
    api.include_router(team_forms.router)
    api.include_router(team_forms.browser_router)
    api.include_router(api_docs.router)
    api.include_router(admin.router)
    api.include_router(native.router)
    api.include_router(team_routes.router)  # before popcorn's /{leaderboard}/{gpu}/{mode}
    api.include_router(popcorn.router)
    api.mount("/static", pages.static_files(), name="static")
    larger = {
        "/admin/update-problems": admin.MAX_PROBLEM_SET_UPLOAD,
        "/admin/leaderboards": admin.MAX_TASK_UPLOAD,
    }
    api.add_middleware(BodyLimit, max_bytes=MAX_BODY_BYTES, larger=larger)
    # Added last, so outermost: a body refused as too large is timed too.
    api.add_middleware(RequestTiming, times=api.state.metrics.requests)
    return api
