"""The HTTP API from the client's side: what `cluster-manager` uses when it is pointed at a
server (CLUSTER_MANAGER_API_URL) instead of a database. httpx for requests, httpx-sse for the
live event stream; every refusal becomes an `ApiError` carrying the server's `detail`."""

from __future__ import annotations

from collections.abc import Iterator
from types import TracebackType
from typing import Any

import httpx
from httpx_sse import connect_sse

from cluster_manager.core.errors import ClusterManagerError

TIMEOUT_S = 60.0


class ApiError(ClusterManagerError):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status


class ApiClient:
    def __init__(self, base_url: str, token: str | None, *, timeout_s: float = TIMEOUT_S):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.has_token = bool(token)
        self._http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout_s)
        self.base_url = base_url

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._http.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            answer = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise ApiError(0, f"cannot reach the API at {self.base_url}: {exc}") from None
        if answer.is_success:
            return answer
        try:
            detail = str(answer.json().get("detail", answer.text))
        except ValueError:
            detail = answer.text.strip() or answer.reason_phrase
        raise ApiError(answer.status_code, f"{detail} (HTTP {answer.status_code})")

    def get(self, path: str, **params: Any) -> Any:
        query = {k: v for k, v in params.items() if v is not None}
        return self._request("GET", path, params=query).json()

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """Any other request with an optional JSON body; its JSON answer."""
        return self._request(method, path, json=body).json()

    def text(self, path: str) -> str:
        return self._request("GET", path).text

    def submit(
        self,
        leaderboard: str,
        gpu: str,
        mode: str,
        file_name: str,
        data: bytes,
        fields: dict[str, str] | None = None,
    ) -> Any:
        """`fields`: the form's other fields (a profile's `ncu_*` filter, say)."""
        files = {"file": (file_name, data)}
        path = f"/submission/{leaderboard}/{gpu}/{mode}"
        return self._request("POST", path, files=files, data=fields or {}).json()

    def events(self, submission_id: int) -> Iterator[tuple[str, Any]]:
        """(event, data) of a submission's live stream until it ends."""
        path = f"/submissions/{submission_id}/events"
        try:
            with connect_sse(self._http, "GET", path, timeout=None) as source:
                if not source.response.is_success:
                    source.response.read()
                    raise ApiError(source.response.status_code, source.response.text)
                for event in source.iter_sse():
                    yield event.event, event.json()
        except httpx.TransportError as exc:
            raise ApiError(0, f"the event stream from {self.base_url} broke: {exc}") from None
