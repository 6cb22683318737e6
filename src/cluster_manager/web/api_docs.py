"""`/docs`: the HTTP API's reference as a page of this site, read from the app's own OpenAPI
schema (`/openapi.json`). Server-rendered under the pages' Content-Security-Policy, so it
needs no script, no CDN (Swagger UI's page came up blank without internet) and no copy of
a third-party bundle on the origin that holds the sessions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request, Response
from markupsafe import Markup

from cluster_manager.web.markdown_text import render_markdown
from cluster_manager.web.rendering import PageRoute, render

router = APIRouter(include_in_schema=False, route_class=PageRoute)
METHODS = ("get", "post", "put", "patch", "delete")
USERS = "Users' endpoints"
TITLES = {"admin": "Organisers' endpoints (the admin token)"}


@dataclass(frozen=True)
class Field:
    name: str
    where: str  # path, query, header, body
    kind: str
    required: bool
    description: Markup


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    anchor: str
    summary: str
    description: Markup
    fields: list[Field]
    body_types: list[str]
    responses: list[str]


def kind_of(schema: dict[str, Any], schemas: dict[str, Any]) -> str:
    """A schema in a few words: `integer`, `string (binary)`, `array of string`, `A or B`."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if options := schema.get("anyOf") or schema.get("oneOf"):
        return " or ".join(kind_of(option, schemas) for option in options)
    if schema.get("type") == "array":
        return "array of " + kind_of(schema.get("items", {}), schemas)
    kind = str(schema.get("type", "any"))
    return f"{kind} ({schema['format']})" if "format" in schema else kind


def _body_fields(operation: dict[str, Any], schemas: dict[str, Any]) -> list[Field]:
    fields = []
    for content in operation.get("requestBody", {}).get("content", {}).values():
        schema = content.get("schema", {})
        if "$ref" in schema:
            schema = schemas.get(str(schema["$ref"]).rsplit("/", 1)[-1], {})
        required = set(schema.get("required", ()))
        for name, prop in schema.get("properties", {}).items():
            description = render_markdown(str(prop.get("description", "")))
            fields.append(
                Field(name, "body", kind_of(prop, schemas), name in required, description)
            )
    return fields


def operation_of(path: str, method: str, op: dict[str, Any], schemas: dict[str, Any]) -> Operation:
    fields = [
        Field(
            str(p["name"]),
            str(p.get("in", "")),
            kind_of(p.get("schema", {}), schemas),
            bool(p.get("required")),
            render_markdown(str(p.get("description", ""))),
        )
        for p in op.get("parameters", ())
    ]
    anchor = "op-" + "".join(c if c.isalnum() else "-" for c in f"{method}{path}")
    return Operation(
        method.upper(),
        path,
        anchor,
        str(op.get("summary", "")),
        render_markdown(str(op.get("description", ""))),
        fields + _body_fields(op, schemas),
        list(op.get("requestBody", {}).get("content", {})),
        [_answer(code, answer, schemas) for code, answer in op["responses"].items()],
    )


def _answer(code: str, answer: dict[str, Any], schemas: dict[str, Any]) -> str:
    """`200 Successful Response: RankingView`; a media type other than JSON said too."""
    kinds = [
        kind_of(content.get("schema", {}), schemas)
        + ("" if media == "application/json" else f" ({media})")
        for media, content in answer.get("content", {}).items()
    ]
    said = f"{code} {answer.get('description', '')}"
    return f"{said}: {', '.join(kinds)}" if kinds else said


def sections_of(openapi: dict[str, Any]) -> list[tuple[str, list[Operation]]]:
    """The operations by tag, those without one first (as `USERS`)."""
    schemas = openapi.get("components", {}).get("schemas", {})
    sections: dict[str, list[Operation]] = {}
    for path, operations in openapi.get("paths", {}).items():
        for method in METHODS:
            if (op := operations.get(method)) is not None:
                tag = str((op.get("tags") or [USERS])[0])
                title = TITLES.get(tag, tag)
                sections.setdefault(title, []).append(operation_of(path, method, op, schemas))
    return sorted(sections.items(), key=lambda item: item[0] != USERS)


@router.get("/docs")
async def api_docs(request: Request) -> Response:
    openapi = request.app.openapi()
    return await render(
        request,
        "docs.html",
        info=openapi.get("info", {}),
        description=render_markdown(str(openapi.get("info", {}).get("description", ""))),
        sections=sections_of(openapi),
    )
