"""Reading endpoints: leaderboards, GPUs, tasks, templates, rankings, health, the schema."""

from __future__ import annotations

import re

import httpx

from cluster_manager.app import App
from tests.api.conftest import BOARD


async def test_leaderboards_have_what_popcorn_reads_and_never_the_secret_seed(
    app: App, client: httpx.AsyncClient
):
    answer = await client.get("/leaderboards")
    assert answer.status_code == 200
    (board,) = answer.json()
    assert board["name"] == BOARD and isinstance(board["description"], str)
    assert isinstance(board["task"], dict) and board["task"]["lang"] == "py"
    assert board["gpu_types"] == ["CPU", "CPU2"] and board["deadline"].startswith("2099-01-01")
    secret_seed = await app.pool.fetchval("SELECT secret_seed FROM leaderboards")
    assert str(secret_seed) not in answer.text and "secret" not in answer.text


async def test_gpus_of_a_leaderboard_and_an_unknown_one(client: httpx.AsyncClient):
    assert (await client.get(f"/gpus/{BOARD}")).json() == ["CPU", "CPU2"]
    missing = await client.get("/gpus/nope")
    assert missing.status_code == 404
    assert missing.json() == {"detail": "there is no leaderboard named 'nope'"}


async def test_task_files_template_and_ranking(client: httpx.AsyncClient):
    task = (await client.get(f"/leaderboards/{BOARD}/task")).json()
    assert "def ref_kernel" in task["files"]["reference.py"]
    template = await client.get(f"/leaderboards/{BOARD}/template/python")
    assert template.status_code == 200 and "custom_kernel" in template.text
    unknown = await client.get(f"/leaderboards/{BOARD}/template/rust")
    assert unknown.status_code == 404 and "has no 'rust' template" in unknown.json()["detail"]
    ranking = (await client.get(f"/leaderboards/{BOARD}")).json()
    assert ranking["rankings"] == {"CPU": [], "CPU2": []}


async def test_invalid_query_values_are_422_with_a_readable_detail(client: httpx.AsyncClient):
    answer = await client.get(f"/leaderboards/{BOARD}?limit=0")
    assert answer.status_code == 422
    assert answer.json()["detail"].startswith("limit: ")


async def test_health_schema_docs_and_register(client: httpx.AsyncClient):
    health = (await client.get("/health")).json()
    assert health["status"] == "ok" and health["database_ms"] >= 0
    schema = (await client.get("/openapi.json")).json()
    assert "/submission/{leaderboard}/{gpu}/{mode}" in schema["paths"]
    assert (await client.get("/docs")).status_code == 200
    register = await client.get("/auth/init")
    assert register.status_code == 501
    assert "cli_id: <token>" in register.json()["detail"]
    assert "POPCORN_API_URL" in register.json()["detail"]


async def test_an_unknown_route_is_a_json_404(client: httpx.AsyncClient):
    answer = await client.get("/no/such/route/here")
    assert answer.status_code == 404 and answer.json() == {"detail": "Not Found"}


async def test_an_unexpected_error_is_a_500_with_a_logged_id_and_no_trace(
    api, app: App, monkeypatch, caplog
):
    async def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("secret internals: /etc/cluster/.env")

    monkeypatch.setattr(app.service.leaderboards, "all", broken)
    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as http:
        answer = await http.get("/leaderboards")
    assert answer.status_code == 500
    detail = answer.json()["detail"]
    error_id = re.fullmatch(r"internal error \(id ([0-9a-f]{8})\); it has been logged", detail)
    assert error_id is not None, detail
    assert "secret internals" not in answer.text and "Traceback" not in answer.text
    logged = [r for r in caplog.records if error_id.group(1) in r.getMessage()]
    assert logged and "secret internals" in str(logged[0].exc_info[1])
