"""The Modal launcher against an in-memory Modal whose calls run the app's body for real.

Modal's cloud is never contacted: `FakeModal` stands in for the deployed app. Its calls run
`modal_app.run_payload` (the real runner and a real kernel) in a background thread, so a
submission goes launcher -> spawn -> run_payload -> RunResult just as on Modal.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster_manager.core.errors import LauncherError
from cluster_manager.core.gpus import GpuType
from cluster_manager.core.models import Mode, Task, Verdict
from cluster_manager.core.payload import encode_payload
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.task import load_task
from cluster_manager.harness import runner
from cluster_manager.launchers.base import RunHandle, RunState, RunTimedOutError
from cluster_manager.launchers.modal import ModalLauncher, _invoke
from tests.conftest import CORRECT, make_request, write_task

modal = pytest.importorskip("modal")
modal_app = pytest.importorskip("cluster_manager.runners.modal_app")

H100 = GpuType("H100", "modal", params={"modal_gpu": "H100"})
WRONG = "def custom_kernel(data):\n    return data * 2\n"


class CallCancelledError(Exception):
    """What getting a cancelled call raises here (Modal raises its own errors)."""


class FakeCall:
    """A spawned call: runs `body(payload)` in a thread once released."""

    def __init__(self, call_id: str, body: Callable[[str], Any], payload: str, hold: bool):
        self.object_id = call_id
        self.cancelled = False
        self._released = threading.Event()
        self._done = threading.Event()
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(body, payload), daemon=True)
        self._thread.start()
        if not hold:
            self._released.set()

    def _run(self, body: Callable[[str], Any], payload: str) -> None:
        self._released.wait()
        try:
            if not self.cancelled:
                self._value = body(payload)
        except Exception as exc:
            self._error = exc
        finally:
            self._done.set()

    def get(self, timeout: float | None = None) -> Any:
        if self.cancelled:
            raise CallCancelledError(self.object_id)
        if not self._done.wait(timeout):
            raise TimeoutError()  # Modal's "not ready yet"
        if self._error is not None:
            raise self._error
        return self._value

    def cancel(self) -> None:
        self.cancelled = True
        self._released.set()

    def join(self) -> None:
        if not self._released.is_set():  # still held at the test's end: never run it
            self.cancel()
        self._thread.join(timeout=60)


class FakeFunction:
    def __init__(self, fake: FakeModal, name: str) -> None:
        self.fake = fake
        self.name = name

    def spawn(self, payload: str) -> FakeCall:
        if self.name not in self.fake.deployed:
            raise LookupError(f"no function {self.name} in the deployed app")
        call = FakeCall(f"fc-{uuid.uuid4().hex}", self.fake.body, payload, self.fake.hold)
        self.fake.calls[call.object_id] = call
        self.fake.spawned.append(self.name)
        return call


class FakeModal:
    """The deployed app and its calls, shared by every launcher of a test as Modal's are."""

    def __init__(self) -> None:
        self.deployed = set(modal_app.FUNCTIONS.values())
        self.body: Callable[[str], Any] = modal_app.run_payload
        self.hold = False  # calls wait until cancelled (or the test ends)
        self.calls: dict[str, FakeCall] = {}
        self.spawned: list[str] = []
        self.apps: set[str] = set()
        self.poll_error: BaseException | None = None

    def lookup(self, app_name: str, function_name: str) -> FakeFunction:
        self.apps.add(app_name)
        return FakeFunction(self, function_name)

    def from_call_id(self, call_id: str) -> FakeCall:
        if self.poll_error is not None:
            raise self.poll_error
        try:
            return self.calls[call_id]
        except KeyError:
            raise LookupError(f"no function call {call_id}") from None

    def launcher(self, state_dir: Path | None = None) -> ModalLauncher:
        return ModalLauncher(
            state_dir=state_dir,
            lookup=self.lookup,
            from_call_id=self.from_call_id,
            poll_interval=0.05,
        )

    def close(self) -> None:
        for call in self.calls.values():
            call.join()


@pytest.fixture
def fake() -> Iterator[FakeModal]:
    fake = FakeModal()
    yield fake
    fake.close()


@pytest.fixture
def task(tmp_path: Path) -> Task:
    return load_task(write_task(tmp_path / "t"))


async def _run(launcher: ModalLauncher, task: Task, code: str) -> RunResult | None:
    handle = await launcher.submit(make_request(task, code), uuid.uuid4().hex, gpu=H100)
    return await launcher.follow(handle, timeout=120)


# --- the app module ----------------------------------------------------------------------------


def test_every_gpu_type_has_a_function():
    assert set(modal_app.FUNCTIONS) == {"T4", "L4", "A100", "H100", "B200"}
    for function_name in modal_app.FUNCTIONS.values():
        assert isinstance(getattr(modal_app, function_name), modal.Function)


def test_each_function_asks_for_its_gpu():
    for gpu, function_name in modal_app.FUNCTIONS.items():
        function = getattr(modal_app, function_name)
        spec = getattr(function, "_spec_", None)  # read offline; no public accessor
        if spec is None:
            pytest.skip("this modal version offers no offline view of a function's spec")
        assert spec.gpus == gpu


@pytest.mark.reliability(
    "Sandbox",
    "a run on Modal: is its process guarded as the runner entrypoint's (undumpable, "
    "subreaper, SIGTERM kills the trees)",
    "the Modal function calls the same guard before it reads the request",
)
def test_run_payload_runs_an_encoded_request(task: Task, monkeypatch, record_property):
    guarded: list[str] = []
    real_run = runner.run

    def run(request, **kwargs):
        assert guarded == ["guarded"], "the request was run before the process was guarded"
        return real_run(request, **kwargs)

    # The real guard would make the test process itself undumpable: record the call instead.
    monkeypatch.setattr(runner, "guard_this_process", lambda: guarded.append("guarded"))
    monkeypatch.setattr(runner, "run", run)
    out = modal_app.run_payload(encode_payload(make_request(task, CORRECT)))
    record_property("observed", f"guard called {len(guarded)} time(s) before the run")
    result = RunResult.from_json(out)
    assert result.passed and result.verdict is Verdict.PASSED, result.message
    assert [p.name for p in result.phases] == ["test"]


def test_the_decorated_function_runs_locally(task: Task):
    out = modal_app.run_t4.local(encode_payload(make_request(task, WRONG)))
    assert RunResult.from_json(out).verdict is Verdict.WRONG_ANSWER


def test_the_launcher_module_does_not_import_modal():
    code = (
        "import sys, cluster_manager.launchers.modal as m\n"
        "m.ModalLauncher()\n"
        "assert 'modal' not in sys.modules, 'modal imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# --- submissions through the launcher ----------------------------------------------------------


async def test_a_correct_submission_passes(fake: FakeModal, task: Task):
    result = await _run(fake.launcher(), task, CORRECT)
    assert result is not None and result.passed, result and result.message
    assert fake.spawned == ["run_h100"]
    assert fake.apps == {"discord-cluster-manager"}


async def test_a_wrong_answer_gets_its_verdict(fake: FakeModal, task: Task):
    result = await _run(fake.launcher(), task, WRONG)
    assert result is not None and result.verdict is Verdict.WRONG_ANSWER


async def test_a_fresh_launcher_reattaches_by_call_id_and_by_key(
    fake: FakeModal, task: Task, tmp_path: Path
):
    first = fake.launcher(tmp_path / "state")
    handle = await first.submit(make_request(task, CORRECT, Mode.TEST), "job-1-attempt-1", gpu=H100)
    assert handle.external_id.startswith("fc-")
    await first.follow(handle, timeout=120)

    second = fake.launcher(tmp_path / "state")  # as if the worker had restarted
    by_id, by_key = second.attach(handle.external_id), second.attach("job-1-attempt-1")
    states = await second.states([by_id, by_key])
    assert states == {handle.external_id: RunState.FINISHED, "job-1-attempt-1": RunState.FINISHED}
    assert (await second.result(by_id)).passed
    assert (await second.result(by_key)).passed


@pytest.mark.reliability(
    "Faults",
    "a restarted worker dispatches the same key to Modal again while the first call runs",
    "one Modal call: the key's call id is remembered across the restart",
)
async def test_the_same_key_starts_one_call_even_after_a_restart(
    fake: FakeModal, task: Task, tmp_path: Path, record_property
):
    fake.hold = True
    request = make_request(task, CORRECT)
    first = await fake.launcher(tmp_path / "state").submit(request, "job-7-1", gpu=H100)
    again = await fake.launcher(tmp_path / "state").submit(request, "job-7-1", gpu=H100)
    record_property(
        "observed", f"{len(fake.calls)} call; {len({first, again})} distinct handle for the key"
    )
    assert first == again
    assert len(fake.calls) == 1


async def test_a_key_whose_call_was_lost_is_spawned_again(fake: FakeModal, task: Task):
    fake.hold = True
    launcher = fake.launcher()
    request = make_request(task, CORRECT)
    first = await launcher.submit(request, "job-8-1", gpu=H100)
    await launcher.cancel(first)
    again = await launcher.submit(request, "job-8-1", gpu=H100)
    assert again != first
    assert len(fake.calls) == 2


async def test_cancel_stops_the_call(fake: FakeModal, task: Task):
    fake.hold = True
    launcher = fake.launcher()
    handle = await launcher.submit(make_request(task, CORRECT), "job-2-1", gpu=H100)
    assert (await launcher.states([handle]))[handle.external_id] is RunState.RUNNING
    await launcher.cancel(handle)
    assert fake.calls[handle.external_id].cancelled
    assert (await launcher.states([handle]))[handle.external_id] is RunState.LOST


@pytest.mark.reliability(
    "Faults",
    "a Modal call that never returns",
    "RunTimedOutError at the timeout, and the call is cancelled",
)
async def test_follow_gives_up_and_cancels_after_its_timeout(
    fake: FakeModal, task: Task, record_property
):
    fake.hold = True
    launcher = fake.launcher()
    handle = await launcher.submit(make_request(task, CORRECT), "job-3-1", gpu=H100)
    with pytest.raises(RunTimedOutError, match="no result within") as raised:
        await launcher.follow(handle, timeout=0.3)
    record_property(
        "observed", f"{raised.value}; cancelled: {fake.calls[handle.external_id].cancelled}"
    )
    assert fake.calls[handle.external_id].cancelled


@pytest.mark.reliability(
    "Faults",
    "a Modal call returns a garbage result",
    "a LauncherError saying the result is invalid; nothing is recorded",
)
@pytest.mark.parametrize(
    "garbage", [{"verdict": "great"}, ["not", "a", "dict"], None], ids=["dict", "list", "none"]
)
async def test_a_garbage_result_is_a_launcher_error(
    fake: FakeModal, task: Task, garbage: Any, record_property
):
    fake.body = lambda payload: garbage
    with pytest.raises(LauncherError, match="result") as raised:
        await _run(fake.launcher(), task, CORRECT)
    record_property("observed", str(raised.value))


# --- faults at Modal's edge --------------------------------------------------------------------


@pytest.mark.reliability(
    "Faults",
    "the Modal container dies mid-run, and a call id Modal does not know",
    "both runs are lost (for the scheduler to retry), never a result",
)
async def test_unknown_and_failed_calls_are_lost(fake: FakeModal, task: Task, record_property):
    def crash(payload: str) -> Any:
        raise RuntimeError("the container died")

    fake.body = crash
    launcher = fake.launcher()
    handle = await launcher.submit(make_request(task, CORRECT), "job-4-1", gpu=H100)
    fake.calls[handle.external_id].join()
    ghost = launcher.attach("fc-unknown")
    states = await launcher.states([handle, ghost])
    record_property(
        "observed",
        f"crashed call {states.get(handle.external_id)}, unknown call {states.get('fc-unknown')}",
    )
    assert states == {handle.external_id: RunState.LOST, "fc-unknown": RunState.LOST}
    with pytest.raises(LauncherError, match="no result"):
        await launcher.result(ghost)


@pytest.mark.reliability(
    "Faults",
    "Modal cannot be reached while polling a run (connection reset)",
    "the run stays running: a network blip never declares it lost",
)
async def test_a_poll_that_cannot_reach_modal_is_not_a_lost_run(fake: FakeModal, record_property):
    fake.poll_error = ConnectionResetError("connection reset")
    launcher = fake.launcher()
    states = await launcher.states([RunHandle("modal", "fc-x")])
    record_property("observed", f"state {states.get('fc-x')}")
    assert states == {"fc-x": RunState.RUNNING}


@pytest.mark.reliability(
    "Faults",
    "spawning a run when the Modal app was never deployed",
    "a LauncherError saying the call did not start",
)
async def test_spawn_failures_and_unknown_gpus_are_launcher_errors(
    fake: FakeModal, task: Task, record_property
):
    launcher = fake.launcher()
    request = make_request(task, CORRECT)
    fake.deployed.clear()  # the app was never deployed
    with pytest.raises(LauncherError, match="did not start") as raised:
        await launcher.submit(request, "job-5-1", gpu=H100)
    record_property("observed", str(raised.value))
    with pytest.raises(LauncherError, match="no Modal function"):
        await launcher.submit(
            request, "job-5-2", gpu=GpuType("X", "modal", params={"modal_gpu": "V100"})
        )
    with pytest.raises(LauncherError, match="registry parameters"):
        await launcher.submit(request, "job-5-3")
    with pytest.raises(LauncherError, match="invalid dispatch key"):
        await launcher.submit(request, "../escape", gpu=H100)


async def test_an_explicit_function_name_wins(fake: FakeModal, task: Task):
    fake.hold = True
    gpu = GpuType("H100-big", "modal", params={"modal_gpu": "H100", "function": "run_b200"})
    await fake.launcher().submit(make_request(task, CORRECT), "job-6-1", gpu=gpu)
    assert fake.spawned == ["run_b200"]


async def test_methods_with_an_aio_twin_are_awaited_not_threaded():
    async def aio_get(timeout: float | None = None) -> str:
        return f"ready after {timeout}"

    def blocking_get(timeout: float | None = None) -> str:
        raise AssertionError("the blocking form was called")

    blocking_get.aio = aio_get  # type: ignore[attr-defined]  # how Modal's methods look
    assert await _invoke(blocking_get, timeout=0) == "ready after 0"
