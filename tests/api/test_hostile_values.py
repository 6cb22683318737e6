"""Values the database cannot hold, sent as an attacker would: numbers beyond 64 bits, NUL
characters. Each is answered 400 or 404 with the reason, never a 500 with a traceback in the
log; nothing is stored."""

from __future__ import annotations

import logging

import httpx
import pytest

from tests.api.conftest import ADMIN_TOKEN, token_of

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
TOO_BIG = 2**63


@pytest.mark.reliability(
    "Bad input",
    "ids beyond 64 bits, NUL characters in names and a quota of 10**20 sent to the API",
    "400 or 404 naming what is wrong; no 500, no traceback in the log, nothing stored",
)
@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", f"/submissions/{TOO_BIG}", None),
        ("GET", f"/admin/submissions/{TOO_BIG}", None),
        ("GET", "/leaderboards/a%00b", None),
        ("GET", "/leaderboards/a%00b/task", None),
        ("PUT", "/admin/quotas/bob", {"per_hour": 10**20}),
        ("PUT", "/admin/quotas/b%00ob", {"per_hour": 5}),
        ("POST", f"/admin/submissions/{TOO_BIG}/invalidate", {"reason": "x"}),
    ],
)
async def test_values_the_database_cannot_hold_are_refused_plainly(
    app, client: httpx.AsyncClient, caplog, method, path, body, record_property
):
    user = {"Authorization": f"Bearer {await token_of(app, 'alice')}"}
    headers = ADMIN if path.startswith("/admin") else user
    with caplog.at_level(logging.ERROR):
        answer = await client.request(method, path, json=body, headers=headers)
    record_property("observed", f"{answer.status_code} {answer.text[:120]}")
    assert answer.status_code in (400, 404, 422), answer.text
    detail = answer.json()["detail"]
    assert "internal error" not in detail and detail
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
