"""The submitted file: from a multipart body read with bounds (the body is refused with 413
as soon as it passes its limit, never read whole first), or from a .zip/.tar.gz holding
exactly one source file, read as task zips are (no path tricks, no links, bounded members)."""

from __future__ import annotations

import io
import json
import posixpath
import tarfile
import zipfile
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from fastapi import Request
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException

from cluster_manager.api.error_handlers import BadRequestError, UploadTooLargeError
from cluster_manager.core.submission import format_size, too_large
from cluster_manager.core.task_sources import CORRUPT_ARCHIVE

MAX_BODY_BYTES = 1024 * 1024
MAX_FORM_FIELD_BYTES = 64 * 1024  # benchmark_index and friends: small text fields
MAX_ARCHIVE_ENTRIES = 16
ARCHIVE_SUFFIXES = (".zip", ".tar.gz", ".tgz")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class BodyLimit:
    """ASGI middleware: a body over `max_bytes` ends the request with 413, whether it says
    its length up front (refused before a byte is read) or streams it in chunks."""

    def __init__(
        self,
        app: Callable[[Scope, Receive, Send], Awaitable[None]],
        max_bytes: int,
        larger: dict[str, int] | None = None,
    ):
        self.app = app
        self.max_bytes = max_bytes
        self.larger = larger or {}  # paths that take more (a problem set's archive)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.larger.get(scope.get("path", ""), self.max_bytes)
        declared = dict(scope.get("headers", ())).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _too_large(send, limit)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                raise UploadTooLargeError(_over(limit))
            return message

        await self.app(scope, counted, send)


def _over(limit: int) -> str:
    return f"the request body is over the {format_size(limit)} limit"


async def _too_large(send: Send, limit: int) -> None:
    body = json.dumps({"detail": _over(limit)}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@dataclass(frozen=True)
class Upload:
    file_name: str
    data: bytes
    fields: dict[str, str]  # the form's text fields


async def read_upload(
    request: Request, max_file_bytes: int, *, unpack: bool = True, what: str = "a submission"
) -> Upload:
    """The multipart body's `file` and text fields; with `unpack`, an archive stands for the
    one source file it holds. `what` the file is: its size limit's name."""
    try:
        async with request.form(
            max_files=1, max_fields=16, max_part_size=MAX_FORM_FIELD_BYTES
        ) as form:  # closes the spooled upload at the end
            upload = form.get("file")
            if not isinstance(upload, UploadFile):
                raise BadRequestError("the multipart body has no part named 'file' with a file")
            data = await upload.read(max_file_bytes + 1)
            fields = {k: v for k, v in form.items() if isinstance(v, str)}
    except MultiPartException as exc:
        raise BadRequestError(f"malformed multipart body: {exc.message}") from None
    name = PurePosixPath((upload.filename or "").replace("\\", "/")).name
    if not name:
        raise BadRequestError("the uploaded file has no name")
    if len(data) > max_file_bytes:
        raise UploadTooLargeError(too_large(name, upload.size, max_file_bytes, what))
    if unpack and name.lower().endswith(ARCHIVE_SUFFIXES):
        name, data = single_source(name, data, max_file_bytes)
    return Upload(name, data, fields)


def single_source(archive_name: str, data: bytes, max_bytes: int) -> tuple[str, bytes]:
    """(name, bytes) of the one file in a .zip or .tar.gz; anything else is refused."""
    try:
        if archive_name.lower().endswith(".zip"):
            return _from_zip(archive_name, data, max_bytes)
        return _from_tar(archive_name, data, max_bytes)
    except (*CORRUPT_ARCHIVE, tarfile.TarError) as exc:
        raise BadRequestError(f"{archive_name}: not a readable archive ({exc})") from None


def _checked_name(archive_name: str, name: str) -> str:
    normal = posixpath.normpath(name)
    if (
        name.startswith("/")
        or "\\" in name
        or "\x00" in name
        or normal == ".."
        or normal.startswith("../")
        or (len(name) > 1 and name[1] == ":")
    ):
        raise BadRequestError(f"{archive_name}: the entry {name!r} has an unsafe path")
    return PurePosixPath(normal).name


def _one(archive_name: str, names: list[str]) -> None:
    if len(names) != 1:
        raise BadRequestError(
            f"{archive_name}: holds {len(names)} files; an archive must hold exactly one "
            "source file"
        )


def _from_zip(archive_name: str, data: bytes, max_bytes: int) -> tuple[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        infos = archive.infolist()
        if len(infos) > MAX_ARCHIVE_ENTRIES:
            raise BadRequestError(f"{archive_name}: more than {MAX_ARCHIVE_ENTRIES} entries")
        files = []
        for info in infos:
            name = _checked_name(archive_name, info.filename)
            if info.is_dir():
                continue
            if (info.external_attr >> 16) & 0o170000 == 0o120000:
                raise BadRequestError(f"{archive_name}: {info.filename!r} is a symbolic link")
            files.append((name, info))
        _one(archive_name, [n for n, _ in files])
        name, info = files[0]
        if info.file_size > max_bytes:
            raise UploadTooLargeError(f"{archive_name}: {name} is over {max_bytes} bytes")
        with archive.open(info) as member:
            content = member.read(max_bytes + 1)  # the header may lie: read with a cap
    if len(content) > max_bytes:
        raise UploadTooLargeError(f"{archive_name}: {name} is over {max_bytes} bytes")
    return name, content


def _from_tar(archive_name: str, data: bytes, max_bytes: int) -> tuple[str, bytes]:
    files: list[tuple[str, bytes]] = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
        for count, member in enumerate(archive, start=1):
            if count > MAX_ARCHIVE_ENTRIES:
                raise BadRequestError(f"{archive_name}: more than {MAX_ARCHIVE_ENTRIES} entries")
            name = _checked_name(archive_name, member.name)
            if member.isdir():
                continue
            if not member.isfile():
                raise BadRequestError(f"{archive_name}: {member.name!r} is not a regular file")
            # Checked before reading on: the next header lies behind this member's bytes.
            if member.size > max_bytes:
                raise UploadTooLargeError(f"{archive_name}: {name} is over {max_bytes} bytes")
            extracted = archive.extractfile(member)
            files.append((name, extracted.read(max_bytes + 1) if extracted else b""))
    _one(archive_name, [n for n, _ in files])
    return files[0]
