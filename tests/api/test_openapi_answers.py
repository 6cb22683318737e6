"""Every route of the API states its answer in `/openapi.json`: a JSON answer's schema from its
model, or, for the few whose answer is no JSON (streams, text), its media type and what it
holds. Routes left out of the schema are the site's pages and /metrics, nothing else."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute, RouteContext, iter_route_contexts

# The routes whose answer is no JSON, by method and path, with their media type.
NOT_JSON = {
    ("POST", "/{leaderboard}/{gpu}/{mode}"): "text/event-stream",
    ("POST", "/profile/{leaderboard}/{gpu}"): "text/event-stream",
    ("GET", "/submissions/{submission_id}/events"): "text/event-stream",
    ("GET", "/leaderboards/{name}/template/{language}"): "text/plain",
}
# Where the routes outside the schema live: the pages (HTML, files, charts) and /metrics.
UNLISTED_MODULES = ("cluster_manager.web.", "cluster_manager.api.metrics")


def _api_routes(api: FastAPI) -> list[RouteContext]:
    """Every route of `api.routes` as served: an included router's with its prefix."""
    return [
        route
        for route in iter_route_contexts(api.routes)
        if isinstance(route.original_route, APIRoute)
    ]


def _answer(schema: dict[str, Any], route: RouteContext, method: str) -> dict[str, Any]:
    operation = schema["paths"][route.path][method.lower()]
    answer: dict[str, Any] = operation["responses"][str(route.status_code or 200)]
    return answer


def _has_fields(schema: dict[str, Any], components: dict[str, Any]) -> bool:
    """A model's schema (by reference), or an array of them: never "any JSON"."""
    if "$ref" in schema:
        return bool(components[schema["$ref"].rsplit("/", 1)[-1]].get("properties"))
    if schema.get("type") == "array":
        return _has_fields(schema["items"], components) or schema["items"] == {"type": "string"}
    return False


def test_every_json_route_declares_its_models_schema(api: FastAPI):
    schema = api.openapi()
    components = schema["components"]["schemas"]
    undeclared = []
    for route in _api_routes(api):
        for method in route.methods or ():
            if not route.include_in_schema or (method, route.path) in NOT_JSON:
                continue
            content = _answer(schema, route, method).get("content", {})
            declared = content.get("application/json", {}).get("schema", {})
            if route.response_model is None or not _has_fields(declared, components):
                undeclared.append(f"{method} {route.path}")
    assert undeclared == []


def test_the_routes_that_answer_no_json_declare_their_media_type(api: FastAPI):
    schema = api.openapi()
    found = {}
    for route in _api_routes(api):
        for method in route.methods or ():
            if (method, route.path) in NOT_JSON:
                answer = _answer(schema, route, method)
                found[method, route.path] = list(answer.get("content", {}))
                assert route.response_model is None
                assert answer["description"] != "Successful Response"  # says what it holds
    assert found == {key: [media] for key, media in NOT_JSON.items()}


def test_only_pages_and_metrics_are_left_out_of_the_schema(api: FastAPI):
    unlisted = [route for route in _api_routes(api) if not route.include_in_schema]
    assert unlisted  # the pages are there
    elsewhere = [
        f"{route.path} ({module})"
        for route in unlisted
        if not (module := getattr(route.endpoint, "__module__", "")).startswith(UNLISTED_MODULES)
    ]
    assert elsewhere == []


def test_a_refusals_answer_is_declared_too(api: FastAPI):
    """popcorn-cli's `register` is answered 501 with a detail: stated as such."""
    schema = api.openapi()
    answer = schema["paths"]["/auth/init"]["get"]["responses"]["501"]
    assert answer["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Detail"
    }
