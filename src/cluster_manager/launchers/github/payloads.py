"""What a run carries across GitHub: the workflow's inputs out, the result artifact back.

Both are sealed with the payload key (core.sealed): everyone who can read the runner repository
sees a run's inputs and artifacts. Without a key nothing is dispatched; a result not sealed
with it is refused.
"""

from __future__ import annotations

import io
import json
import zipfile
import zlib

from cluster_manager.core.errors import LauncherError
from cluster_manager.core.gpus import GpuType
from cluster_manager.core.models import RunRequest
from cluster_manager.core.payload import GITHUB_INPUTS_LIMIT, encode_payload, open_result
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.sealed import KEY_ENV, SealError, as_key

RESULT_ARTIFACT = "result"
RESULT_FILE = "result.json"
MAX_RESULT_BYTES = 32 * 1024 * 1024


def workflow_params(gpu: GpuType | None) -> tuple[str, list[str]]:
    """The GPU type's workflow file and runner labels."""
    if gpu is None:
        raise LauncherError("the GitHub launcher needs the GPU type (workflow and runner labels)")
    workflow = gpu.params.get("workflow")
    labels = gpu.params.get("runner_labels")
    if not isinstance(workflow, str) or not workflow:
        raise LauncherError(f"GPU type {gpu.name} has no 'workflow' parameter")
    if (
        not isinstance(labels, list | tuple)
        or not labels
        or not all(isinstance(label, str) for label in labels)
    ):
        raise LauncherError(f"GPU type {gpu.name} needs 'runner_labels', a list of strings")
    return workflow, list(labels)


def as_payload_key(key: bytes | str | None) -> bytes | None:
    """The payload key as bytes; a malformed one is a LauncherError."""
    if key is None:
        return None
    try:
        return as_key(key)
    except SealError as exc:
        raise LauncherError(str(exc)) from None


def dispatch_inputs(
    request: RunRequest, key: str, labels: list[str], payload_key: bytes | None
) -> dict[str, str]:
    if payload_key is None:
        raise LauncherError(
            f"the GitHub launcher needs {KEY_ENV}: the runner repository shows every run's "
            "inputs and artifacts to its readers, so the submission and the secret seed travel "
            "sealed. Set the same key in the bot's settings and as the repository's secret"
        )
    payload = encode_payload(request, payload_key)
    inputs = {"payload": payload, "job_id": key, "runner_labels": json.dumps(labels)}
    # Measured as the JSON GitHub receives: a little stricter than the values alone.
    size = len(json.dumps(inputs, separators=(",", ":")))
    if size > GITHUB_INPUTS_LIMIT:
        raise LauncherError(
            f"payload is {len(payload):,} characters ({size:,} with the other inputs); GitHub "
            f"accepts at most {GITHUB_INPUTS_LIMIT:,} — make the submission or task smaller"
        )
    return inputs


def read_result(blob: bytes, run_id: str, key: bytes | None) -> RunResult:
    """result.json from the artifact's zip, read with a bound, opened with the payload key,
    checked as a RunResult."""
    where = f"GitHub run {run_id}"
    raw = _result_bytes(blob, where)
    try:
        data = json.loads(_opened(raw, key))
    except SealError as exc:
        raise LauncherError(f"{where}: {RESULT_FILE}: {exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise LauncherError(f"{where}: {RESULT_FILE} is not valid JSON ({exc})") from exc
    try:
        return RunResult.from_json(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise LauncherError(f"{where}: {RESULT_FILE} is not a valid run result ({exc!r})") from exc


def _result_bytes(blob: bytes, where: str) -> bytes:
    """result.json's bytes from the zip, never more than MAX_RESULT_BYTES of them."""
    try:
        with zipfile.ZipFile(io.BytesIO(blob)) as archive:
            info = archive.getinfo(RESULT_FILE)
            if info.file_size > MAX_RESULT_BYTES:
                raise LauncherError(f"{where}: {RESULT_FILE} is {info.file_size:,} bytes")
            with archive.open(info) as member:
                raw = member.read(MAX_RESULT_BYTES + 1)
    except KeyError:
        raise LauncherError(f"{where}: the result artifact holds no {RESULT_FILE}") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError) as exc:
        raise LauncherError(f"{where}: the result artifact is not a valid zip ({exc})") from exc
    if len(raw) > MAX_RESULT_BYTES:
        raise LauncherError(f"{where}: {RESULT_FILE} is larger than {MAX_RESULT_BYTES:,} bytes")
    return raw


def _opened(raw: bytes, key: bytes | None) -> str | bytes:
    """The result's JSON: opened with the key when there is one, else as it came."""
    if key is None:
        return raw
    return open_result(raw.decode("utf-8", errors="replace"), key)
