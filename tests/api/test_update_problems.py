"""POST /admin/update-problems: a problem set synced from an uploaded repository archive, with
the plan `leaderboard sync` prints; the archive is read with bounds and never trusted."""

from __future__ import annotations

import io
import tempfile
import zipfile

import httpx
import pytest

from cluster_manager.app import App
from tests.api.conftest import popcorn_headers, token_of
from tests.api.test_admin import ADMIN
from tests.conftest import EXAMPLES

SEASON = """\
name: Season
problems:
  - directory: season/identity_py
    name: synced-identity
    deadline: "2099-01-01"
    gpus: [CPU, B200]
"""


def repository_zip(extra: dict[str, bytes] | None = None, season: str = SEASON) -> bytes:
    """As GitHub serves a repository: one top folder, the problem sets under `problems/`."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        top = "kernels-main/problems/"
        archive.writestr(top + "season.yaml", season)
        archive.writestr(top + "season/utils.py", (EXAMPLES / "utils.py").read_bytes())
        for path in (EXAMPLES / "identity_py").iterdir():
            if path.is_file():
                archive.writestr(top + f"season/identity_py/{path.name}", path.read_bytes())
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return buffer.getvalue()


async def post(client: httpx.AsyncClient, data: bytes, headers=ADMIN, **fields: str):
    return await client.post(
        "/admin/update-problems",
        headers=headers,
        files={"file": ("kernels-main.zip", data)},
        data={"problem_set": "season", **fields},
    )


async def test_an_uploaded_problem_set_is_planned_then_synced(app: App, client: httpx.AsyncClient):
    dry = await post(client, repository_zip(), dry_run="true")
    assert dry.status_code == 200, dry.text
    body = dry.json()
    assert body["applied"] is False and body["items"][0]["action"] == "create"
    assert body["items"][0]["notes"] == ["GPU type B200 is not configured here: left out"]
    assert "+ synced-identity: would create on CPU" in body["text"]
    assert "synced-identity" not in [b.name for b in await app.service.leaderboards.all()]

    done = (await post(client, repository_zip())).json()
    assert done["applied"] is True and done["held"] == []
    assert (await app.service.leaderboards.get("synced-identity")).gpus == ("CPU",)
    again = (await post(client, repository_zip())).json()
    assert [i["action"] for i in again["items"]] == ["unchanged"]


async def test_only_the_admin_may(app: App, client: httpx.AsyncClient):
    token = await token_of(app, "alice")
    refused = await post(client, repository_zip(), headers=popcorn_headers(token))
    assert refused.status_code == 403


@pytest.mark.reliability(
    "Bad input",
    "POST /admin/update-problems with an archive holding a '../' path, with no such problem "
    "set, with bytes that are no zip, with a file and a folder of one name, with U+202E in a "
    "file's name, and naming a task folder it lacks",
    "400 naming the problem (never a server path); no file written outside a temporary "
    "folder, nothing synced",
)
@pytest.mark.parametrize(
    ("data", "fields", "message"),
    [
        (repository_zip({"../escape.txt": b"x"}), {}, "escapes the archive"),
        (repository_zip(), {"problem_set": "nope"}, "one nope.yaml; found it nowhere"),
        (b"not a zip", {}, "is not a readable zip"),
        (
            repository_zip({"kernels-main/x": b"a file", "kernels-main/x/y": b"and a folder"}),
            {},
            "is both a file and a folder in the archive",
        ),
        (
            repository_zip({"kernels-main/problems/season/identity_py/\u202eyp.png": b"x"}),
            {},
            "holds characters that do not show as written (U+202E)",
        ),
        (
            repository_zip(season=SEASON.replace("season/identity_py", "season/nope")),
            {},
            "invalid task: season/nope: no such file or folder",
        ),
    ],
)
async def test_bad_archives_change_nothing(
    app: App, client: httpx.AsyncClient, data: bytes, fields: dict[str, str], message: str
):
    before = [b.name for b in await app.service.leaderboards.all(include_closed=True)]
    answer = await post(client, data, **fields)
    assert answer.status_code == 400 and message in answer.json()["detail"]
    assert "cm-problems" not in answer.text and tempfile.gettempdir() not in answer.text
    assert [b.name for b in await app.service.leaderboards.all(include_closed=True)] == before


@pytest.mark.reliability(
    "Access",
    "POST /admin/update-problems whose competition file names its own folder as the task "
    "and whose task.yml sources ../../../../etc/passwd",
    "400: the source leads outside the problem set's folder; nothing synced, no server file "
    "read or named",
)
async def test_an_archive_cannot_publish_the_servers_files(app: App, client: httpx.AsyncClient):
    escape = '\n  - {"name": "passwd.py", "source": "' + "../" * 12 + 'etc/passwd"}'
    task_yml = (EXAMPLES / "identity_py" / "task.yml").read_text()
    task_yml = task_yml.replace('"source": "../utils.py"}', '"source": "../utils.py"}' + escape)
    here = SEASON.replace("directory: season/identity_py", 'directory: "."')
    top = "kernels-main/problems/"
    extra = {top + "task.yml": task_yml.encode()}
    for name in ("reference.py", "task.py", "submission.py", "template.py"):
        extra[top + name] = (EXAMPLES / "identity_py" / name).read_bytes()
    data = repository_zip(extra, season=here)
    answer = await post(client, data)
    assert answer.status_code == 400, answer.text
    detail = answer.json()["detail"]
    assert "leads outside the root, problems/" in detail
    assert "/tmp" not in detail and "root:" not in detail
    assert "synced-identity" not in [b.name for b in await app.service.leaderboards.all()]
