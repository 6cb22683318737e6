"""Uploads: bounded bodies, the same file rules as every front end, archives with exactly one
source file, and clear answers for everything else. Nothing refused is stored."""

from __future__ import annotations

import io
import tarfile
import zipfile

import httpx
import pytest

from cluster_manager.app import App
from tests.api.conftest import BOARD, popcorn_headers, source, token_of

URL = f"/submission/{BOARD}/CPU/test"


@pytest.fixture
async def alice(app: App) -> dict[str, str]:
    return popcorn_headers(await token_of(app, "alice"))


async def stored(app: App) -> int:
    return int(await app.pool.fetchval("SELECT count(*) FROM submissions"))


def zipped(*entries: tuple[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries:
            archive.writestr(name, data)
    return buffer.getvalue()


def tarred(*members: tarfile.TarInfo | tuple[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for member in members:
            if isinstance(member, tarfile.TarInfo):
                archive.addfile(member)
            else:
                info = tarfile.TarInfo(member[0])
                info.size = len(member[1])
                archive.addfile(info, io.BytesIO(member[1]))
    return buffer.getvalue()


async def post(client: httpx.AsyncClient, headers: dict[str, str], name: str, data: bytes):
    return await client.post(URL, headers=headers, files={"file": (name, data)})


@pytest.mark.parametrize(
    ("name", "archive"),
    [
        ("kernel.zip", lambda: zipped(("dir/submission.py", source()))),
        ("kernel.tar.gz", lambda: tarred(("submission.py", source()))),
    ],
)
async def test_an_archive_with_one_source_file_is_that_file(
    app: App, client: httpx.AsyncClient, alice: dict[str, str], name: str, archive
):
    answer = await post(client, alice, name, archive())
    assert answer.status_code == 202, answer.text
    row = await app.pool.fetchrow("SELECT file_name FROM submissions")
    assert row["file_name"] == "submission.py"


@pytest.mark.parametrize(
    ("name", "archive", "status", "detail"),
    [
        ("k.zip", lambda: zipped(("a.py", b"x"), ("b.py", b"y")), 400, "holds 2 files"),
        ("k.zip", lambda: zipped(("../../etc/submission.py", b"x")), 400, "unsafe path"),
        ("k.zip", lambda: zipped(("/abs/submission.py", b"x")), 400, "unsafe path"),
        ("k.zip", lambda: b"PK\x03\x04 not really a zip", 400, "not a readable archive"),
        # 64 MiB of zeros compress to ~64 KiB: refused from its header, never inflated.
        ("k.zip", lambda: zipped(("submission.py", bytes(64 << 20))), 413, "is over"),
        ("k.tar.gz", lambda: tarred(("submission.py", bytes(64 << 20))), 413, "is over"),
        ("k.tar.gz", lambda: tarred(_link("submission.py", "/etc/passwd")), 400, "not a regular"),
        ("k.tar.gz", lambda: tarred(*[(f"f{i}.py", b"x") for i in range(40)]), 400, "entries"),
    ],
)
@pytest.mark.reliability(
    "Bad input",
    "uploading archives: two files, ../ and absolute names, a symlink, 40 entries, a damaged "
    "zip, 64 MiB of zeros compressed into a zip and a tar.gz",
    "400 or 413 naming the problem, nothing inflated past the 256 KiB cap, nothing stored",
)
async def test_a_bad_archive_is_refused_and_nothing_is_stored(
    app: App, client: httpx.AsyncClient, alice: dict[str, str], name, archive, status, detail
):
    answer = await post(client, alice, name, archive())
    assert answer.status_code == status, answer.text
    assert detail in answer.json()["detail"]
    assert await stored(app) == 0


def _link(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    return info


@pytest.mark.reliability(
    "Bad input",
    "a zip whose header says 100 bytes for a 2 MiB member",
    "refused (400/413), the member read with a cap, nothing stored",
)
async def test_a_zip_member_lying_about_its_size_is_read_with_a_cap(
    app: App, client: httpx.AsyncClient, alice: dict[str, str]
):
    data = bytearray(zipped(("submission.py", bytes(2 << 20))))
    # Rewrite the central directory's uncompressed size to 100 bytes: the header lies.
    central = data.rfind(b"PK\x01\x02")
    data[central + 24 : central + 28] = (100).to_bytes(4, "little")
    answer = await post(client, alice, "k.zip", bytes(data))
    assert answer.status_code in (400, 413), answer.text
    assert await stored(app) == 0


@pytest.mark.reliability(
    "Bad input",
    "a 2 MiB upload with its Content-Length",
    "413 before the body is read, nothing stored",
)
async def test_a_body_over_a_mebibyte_is_refused_before_it_is_read(
    app: App, client: httpx.AsyncClient, alice: dict[str, str]
):
    answer = await post(client, alice, "submission.py", b"#" * (2 << 20))
    assert answer.status_code == 413
    assert answer.json() == {"detail": "the request body is over the 1 MiB limit"}
    assert await stored(app) == 0


@pytest.mark.reliability(
    "Bad input",
    "a 4 MiB upload sent in chunks without a Content-Length, to a real server",
    "413 once the body passes 1 MiB, nothing stored",
)
async def test_a_chunked_body_is_cut_off_at_the_limit(
    app: App, live_url: str, alice: dict[str, str]
):
    boundary = "b0undary"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="s.py"\r\n\r\n'
    ).encode()

    async def chunks():
        yield head
        for _ in range(64):  # 4 MiB, with no Content-Length to refuse it by
            yield b"#" * (64 << 10)

    headers = {**alice, "Content-Type": f"multipart/form-data; boundary={boundary}"}
    async with httpx.AsyncClient(base_url=live_url, timeout=60) as http:
        answer = await http.post(URL, headers=headers, content=chunks())
    assert answer.status_code == 413 and "over the 1 MiB limit" in answer.json()["detail"]
    assert await stored(app) == 0


@pytest.mark.parametrize(
    ("name", "data", "status", "detail"),
    [
        (
            "submission.py",
            b"#" * (300 << 10),
            413,
            "submission.py is 300 KiB, over the 256 KiB limit for a submission",
        ),
        ("submission.rs", b"fn main() {}", 422, "submission.rs"),
        ("submission.py", b"\xff\xfe not utf-8", 422, "not UTF-8"),
        ("submission.py", b"def other(): pass\n", 422, "custom_kernel"),
        ("submission.py", b"", 422, "empty"),
    ],
)
async def test_the_file_rules_of_every_front_end(
    app: App, client: httpx.AsyncClient, alice: dict[str, str], name, data, status, detail
):
    answer = await post(client, alice, name, data)
    assert answer.status_code == status, answer.text
    assert detail in answer.json()["detail"]
    assert await stored(app) == 0


@pytest.mark.reliability(
    "Bad input",
    "a multipart body cut off before its end, one without a file part, an unknown mode, GPU "
    "or leaderboard",
    "400 or 404 naming the problem, nothing stored",
)
async def test_malformed_or_incomplete_requests(
    app: App, client: httpx.AsyncClient, alice: dict[str, str]
):
    broken = await client.post(
        URL,
        headers={**alice, "Content-Type": "multipart/form-data; boundary=zz"},
        content=b'--zz\r\nContent-Disposition: form-data; name="file"\r\n\r\nno end',
    )
    assert broken.status_code == 400 and "multipart" in broken.json()["detail"]
    no_file = await client.post(URL, headers=alice, data={"other": "x"})
    assert no_file.status_code == 400 and "'file'" in no_file.json()["detail"]
    cases = [
        (f"/submission/{BOARD}/CPU/fast", 400, "unknown mode 'fast'"),
        (f"/submission/{BOARD}/H100/test", 400, "does not run on 'H100'"),
        ("/submission/nope/CPU/test", 404, "no leaderboard named 'nope'"),
    ]
    for url, status, detail in cases:
        answer = await client.post(url, headers=alice, files={"file": ("s.py", source())})
        assert answer.status_code == status, (url, answer.text)
        assert detail in answer.json()["detail"]
    assert await stored(app) == 0


async def test_deadline_and_the_leaderboards_rate_limit(
    app: App, client: httpx.AsyncClient, alice: dict[str, str]
):
    await app.pool.execute("UPDATE leaderboards SET rate_limit_per_hour = 1")
    assert (await post(client, alice, "submission.py", source())).status_code == 202
    limited = await post(client, alice, "submission.py", source())
    assert limited.status_code == 429 and int(limited.headers["Retry-After"]) > 0
    # Its organisers take no runs after the deadline (they are taken by default).
    await app.pool.execute(
        "UPDATE leaderboards SET deadline = now() - interval '1 hour', after_deadline_runs = false"
    )
    closed = await post(client, alice, "submission.py", source())
    assert closed.status_code == 403 and "deadline" in closed.json()["detail"]
    assert await stored(app) == 1
