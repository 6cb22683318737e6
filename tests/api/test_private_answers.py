"""Answers that hold a caller's secret (a one-time team or invite code, a submission's code and
output, whatever the admin reads) carry `Cache-Control: no-store`, so that no browser cache or
proxy keeps a copy for the next person at that machine; public answers are left to caches."""

from __future__ import annotations

import httpx

from cluster_manager.app import App
from cluster_manager.core.models import Mode
from cluster_manager.service import Submitter
from tests.api.conftest import ADMIN_TOKEN, BOARD, popcorn_headers, source, token_of
from tests.storage.helpers import finish_submission

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


async def test_answers_with_a_secret_are_never_stored(app: App, client: httpx.AsyncClient):
    alice = popcorn_headers(await token_of(app, "alice"))
    receipt = await app.service.submissions.submit(
        BOARD, Submitter("alice", "alice"), "submission.py", source(), gpus=["CPU"],
        mode=Mode.LEADERBOARD,
    )  # fmt: skip
    await finish_submission(app.pool, receipt, 2.0)
    made = await client.post(f"/leaderboards/{BOARD}/teams", headers=alice, json={"name": "red"})
    assert made.status_code == 201

    private = {
        "a team code": await client.post(
            f"/leaderboards/{BOARD}/teams/mine/invites", headers=alice
        ),
        "one's submission with its code": await client.get(
            f"/user/submissions/{receipt.submission_id}", headers=alice
        ),
        "one's submissions": await client.get("/user/submissions", headers=alice),
        "minted invite codes": await client.post(
            "/admin/invites", headers=ADMIN, json={"leaderboard": BOARD, "count": 2}
        ),
        "a board's invite codes": await client.get(
            f"/admin/leaderboards/{BOARD}/invites", headers=ADMIN
        ),
        "any submission, read by the admin": await client.get(
            f"/admin/submissions/{receipt.submission_id}", headers=ADMIN
        ),
    }
    for what, answer in private.items():
        assert answer.is_success, (what, answer.text)
        assert answer.headers.get("cache-control") == "no-store", what
    assert "def custom_kernel" in private["one's submission with its code"].json()["code"]

    public = [
        await client.get(f"/leaderboards/{BOARD}", headers={"Accept": "application/json"}),
        await client.get(f"/leaderboards/{BOARD}/teams"),
        await client.get(f"/leaderboards/{BOARD}/task"),
    ]
    for answer in public:
        assert answer.status_code == 200 and "cache-control" not in answer.headers
