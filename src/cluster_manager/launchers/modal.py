"""Runs requests on Modal: spawns the deployed app's function for the GPU type, polls its call.

The handle's external id is Modal's function call id. The scheduler records the dispatch key
before submitting, so a key is accepted wherever a call id is: it is resolved through the
key -> call id map, which is kept in memory and, with a `state_dir`, in one file per key
written before `submit` returns. Without a `state_dir` a restart forgets the map, and a key
submitted again after a restart starts a second call. Even with one, a crash between the
spawn and the write of its file does the same: Modal has no idempotency key to ask it with.

`modal` is imported lazily, only when the real Modal is used.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from cluster_manager.core.errors import LauncherError
from cluster_manager.core.gpus import GpuType
from cluster_manager.core.models import RunRequest
from cluster_manager.core.payload import encode_payload
from cluster_manager.core.run_results import RunResult
from cluster_manager.launchers.base import Launcher, RunHandle, RunState

log = logging.getLogger(__name__)

DEFAULT_APP_NAME = "discord-cluster-manager"
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_CALL_SUFFIX = ".call"


class CallLike(Protocol):
    """What the launcher uses of `modal.FunctionCall`."""

    @property
    def object_id(self) -> str: ...

    def get(self, timeout: float | None = None) -> Any: ...

    def cancel(self) -> Any: ...


class FunctionLike(Protocol):
    """What the launcher uses of `modal.Function`."""

    def spawn(self, payload: str) -> CallLike: ...


Lookup = Callable[[str, str], FunctionLike]
FromCallId = Callable[[str], CallLike]


def _modal_lookup(app_name: str, function_name: str) -> FunctionLike:
    modal = _import_modal()
    function: FunctionLike = modal.Function.from_name(app_name, function_name)
    return function


def _modal_from_call_id(call_id: str) -> CallLike:
    modal = _import_modal()
    call: CallLike = modal.FunctionCall.from_id(call_id)
    return call


def _import_modal() -> Any:
    try:
        import modal
    except ImportError as exc:
        raise LauncherError("the Modal launcher needs the `modal` package") from exc
    return modal


def _deployed_functions() -> Mapping[str, str]:
    """Modal GPU -> function name, from the app module (which imports `modal` itself)."""
    try:
        from cluster_manager.runners.modal_app import FUNCTIONS
    except ImportError as exc:
        raise LauncherError(f"cannot load the Modal app's functions: {exc}") from exc
    return FUNCTIONS


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Failures to reach Modal, which say nothing about the run itself."""
    errors: tuple[type[BaseException], ...] = (OSError,)
    with contextlib.suppress(ImportError):
        from modal import exception as mx

        errors += (
            mx.ConnectionError,
            mx.ServiceError,
            mx.InternalError,
            mx.ResourceExhaustedError,
            mx.AuthError,
            mx.ClientClosed,
        )
    return errors


async def _invoke(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Modal's methods have an `.aio` twin; plain callables run in a thread, off the loop."""
    aio = getattr(method, "aio", None)
    if aio is not None:
        return await aio(*args, **kwargs)
    return await asyncio.to_thread(method, *args, **kwargs)


def _parse_result(call_id: str, value: Any) -> RunResult:
    if not isinstance(value, dict):
        raise LauncherError(f"Modal call {call_id}: returned {type(value).__name__}, not a result")
    try:
        return RunResult.from_json(value)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise LauncherError(f"Modal call {call_id}: unreadable result ({exc!r})") from exc


class ModalLauncher(Launcher):
    name = "modal"

    def __init__(
        self,
        app_name: str = DEFAULT_APP_NAME,
        *,
        state_dir: Path | None = None,
        lookup: Lookup | None = None,
        from_call_id: FromCallId | None = None,
        poll_interval: float = 2.0,
    ) -> None:
        self.app_name = app_name
        self.state_dir = state_dir
        self.poll_interval = poll_interval
        self._lookup = lookup or _modal_lookup
        self._from_call_id = from_call_id or _modal_from_call_id
        self._functions: dict[str, FunctionLike] = {}
        self._keys: dict[str, str] = {}  # dispatch key -> call id
        self._results: dict[str, Any] = {}  # call id -> returned value, until fetched

    # --- key -> call id -----------------------------------------------------------------------

    def _key_file(self, key: str) -> Path | None:
        if self.state_dir is None or not _KEY.fullmatch(key):
            return None
        return self.state_dir / f"{key}{_CALL_SUFFIX}"

    def _recorded(self, key: str) -> str | None:
        if key in self._keys:
            return self._keys[key]
        path = self._key_file(key)
        if path is None:
            return None
        try:
            call_id = path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise LauncherError(f"cannot read the Modal call of {key}: {exc}") from exc
        if call_id:
            self._keys[key] = call_id
        return call_id or None

    def _record(self, key: str, call_id: str) -> None:
        """Written whole or not at all: a reader never sees half a call id."""
        path = self._key_file(key)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(f".{path.name}.{os.getpid()}")
            partial.write_text(call_id, encoding="utf-8")
            partial.replace(path)
        self._keys[key] = call_id

    def _resolve(self, external_id: str) -> str:
        """A call id stays as it is; a dispatch key becomes the call id recorded for it."""
        return self._recorded(external_id) or external_id

    # --- the Launcher interface ---------------------------------------------------------------

    async def submit(
        self, request: RunRequest, key: str, *, gpu: GpuType | None = None
    ) -> RunHandle:
        if not _KEY.fullmatch(key):
            raise LauncherError(f"invalid dispatch key {key!r}")
        known = self._recorded(key)
        if known is not None and await self._state(known) is not RunState.LOST:
            return RunHandle(self.name, known)  # already dispatched under this key
        function = self._function(self._function_name(gpu))
        try:
            call = await _invoke(function.spawn, encode_payload(request))
            call_id = str(call.object_id)
        except Exception as exc:
            raise LauncherError(f"Modal did not start the run: {exc!r}") from exc
        try:
            self._record(key, call_id)
        except OSError as exc:
            # Unrecorded, a retry with this key would start a second run: stop this one.
            await self._cancel_quietly(call_id)
            raise LauncherError(f"cannot record the Modal call of {key}: {exc}") from exc
        return RunHandle(self.name, call_id)

    async def states(self, handles: Sequence[RunHandle]) -> dict[str, RunState]:
        ids = [h.external_id for h in handles]
        found = await asyncio.gather(*(self._state(self._resolve(i)) for i in ids))
        return dict(zip(ids, found, strict=True))

    async def result(self, handle: RunHandle) -> RunResult:
        call_id = self._resolve(handle.external_id)
        if call_id in self._results:
            return _parse_result(call_id, self._results.pop(call_id))
        try:
            value = await _invoke(self._from_call_id(call_id).get, timeout=0)
        except Exception as exc:
            raise LauncherError(f"Modal call {call_id}: no result ({exc!r})") from exc
        return _parse_result(call_id, value)

    async def cancel(self, handle: RunHandle) -> None:
        call_id = self._resolve(handle.external_id)
        self._results.pop(call_id, None)
        try:
            await _invoke(self._from_call_id(call_id).cancel)
        except Exception as exc:
            raise LauncherError(f"Modal call {call_id}: cannot cancel ({exc!r})") from exc

    # --- helpers ------------------------------------------------------------------------------

    def _function_name(self, gpu: GpuType | None) -> str:
        if gpu is None:
            raise LauncherError("the Modal launcher needs the GPU type's registry parameters")
        if "function" in gpu.params:
            return str(gpu.params["function"])
        modal_gpu = str(gpu.params.get("modal_gpu", "")).upper()
        functions = _deployed_functions()
        if modal_gpu not in functions:
            known = ", ".join(sorted(functions))
            raise LauncherError(
                f"GPU type {gpu.name}: no Modal function for modal_gpu {modal_gpu!r} "
                f"(known: {known})"
            )
        return functions[modal_gpu]

    def _function(self, function_name: str) -> FunctionLike:
        if function_name not in self._functions:
            try:
                self._functions[function_name] = self._lookup(self.app_name, function_name)
            except LauncherError:
                raise
            except Exception as exc:
                raise LauncherError(f"Modal function {function_name}: {exc!r}") from exc
        return self._functions[function_name]

    async def _state(self, call_id: str) -> RunState:
        """One poll without waiting; a ready value is kept for `result`."""
        if call_id in self._results:
            return RunState.FINISHED
        try:
            value = await _invoke(self._from_call_id(call_id).get, timeout=0)
        except TimeoutError:  # the builtin one: not ready yet (Modal's own timeouts differ)
            return RunState.RUNNING
        except _transport_errors() as exc:
            # Unknown is not lost: calling it lost would start a second, paid run.
            log.warning("Modal call %s: cannot poll (%r); assuming it still runs", call_id, exc)
            return RunState.RUNNING
        except Exception as exc:  # expired, cancelled, failed, timed out or unknown id
            log.info("Modal call %s ended without a result: %r", call_id, exc)
            return RunState.LOST
        self._results[call_id] = value
        return RunState.FINISHED

    async def _cancel_quietly(self, call_id: str) -> None:
        with contextlib.suppress(LauncherError):
            await self.cancel(RunHandle(self.name, call_id))
