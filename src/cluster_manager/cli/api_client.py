"""The HTTP API from the client's side: what `cluster-manager` uses when it is pointed at a
server (CLUSTER_MANAGER_API_URL) instead of a database. httpx for requests, httpx-sse for the
live event stream; every refusal becomes an `ApiError` carrying the server's `detail`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx
from httpx_sse import aconnect_sse

from cluster_manager.core.errors import ClusterManagerError

TIMEOUT_S = 60.0


class ApiError(ClusterManagerError):
    """The server refused a request (`status`; 0: it could not be reached), with its reason."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status


def segment(value: str | int) -> str:
    """A value as one segment of a path: a name with '/' or '?' in it stays one segment."""
    return quote(str(value), safe="")


class ApiClient:
    def __init__(self, base_url: str, token: str | None, *, timeout_s: float = TIMEOUT_S):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.has_token = bool(token)
        self._http = httpx.AsyncClient(base_url=base_url, headers=headers, timeout=timeout_s)
        self.base_url = base_url

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._http.aclose()

    async def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            answer = await self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise ApiError(0, f"cannot reach the API at {self.base_url}: {exc}") from None
        if answer.is_success:
            return answer
        raise _refusal(answer)

    async def get(self, path: str, **params: Any) -> Any:
        query = {k: v for k, v in params.items() if v is not None}
        return (await self._request("GET", path, params=query)).json()

    async def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """Any other request with an optional JSON body; its JSON answer."""
        return (await self._request(method, path, json=body)).json()

    async def text(self, path: str) -> str:
        return (await self._request("GET", path)).text

    async def upload(
        self, path: str, file_name: str, data: bytes, fields: dict[str, str] | None = None
    ) -> Any:
        """A multipart POST of one file (part `file`) and text fields; its JSON answer."""
        files = {"file": (file_name, data)}
        return (await self._request("POST", path, files=files, data=fields or {})).json()

    async def events(self, submission_id: int) -> AsyncIterator[tuple[str, Any]]:
        """(event, data) of a submission's live stream until it ends."""
        path = f"/submissions/{segment(submission_id)}/events"
        try:
            async with aconnect_sse(self._http, "GET", path, timeout=None) as source:
                if not source.response.is_success:
                    await source.response.aread()
                    raise _refusal(source.response)
                async for event in source.aiter_sse():
                    yield event.event, event.json()
        except httpx.TransportError as exc:
            raise ApiError(0, f"the event stream from {self.base_url} broke: {exc}") from None


def _refusal(answer: httpx.Response) -> ApiError:
    """Our server's `detail` as it is: a sentence for the user (the status stays on the
    error for code). An answer without one (a proxy's page) says its status instead."""
    try:
        body = answer.json()
        detail = body.get("detail") if isinstance(body, dict) else None
    except ValueError:
        detail = None
    if detail is not None:
        return ApiError(answer.status_code, str(detail))
    said = answer.text.strip()[:200] or answer.reason_phrase
    return ApiError(answer.status_code, f"the server answered HTTP {answer.status_code}: {said}")
