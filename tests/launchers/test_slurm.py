"""The Slurm launcher: sbatch options from the registry, and real runs on a loopback cluster."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from cluster_manager.core.errors import LauncherError
from cluster_manager.core.gpus import GpuType
from cluster_manager.core.models import Mode, RunRequest, Task, Verdict
from cluster_manager.core.phases import run_timeout
from cluster_manager.core.task import load_task
from cluster_manager.launchers.base import RunHandle, RunState, RunTimedOutError
from cluster_manager.launchers.slurm import (
    STALE_RUN_S,
    SlurmLauncher,
    sbatch_command,
    shared_dir,
    slurm_state,
)
from tests.conftest import CORRECT, make_request, processes_with, write_task
from tests.support.slurm_cluster import jobs_named, slurm_cluster, squeue_active  # noqa: F401
from tests.support.slurm_lock import slurm_alone, slurm_shared  # noqa: F401

# Every test here shares one cluster of two CPUs, on both test processes at once:
# tests.support.slurm_lock keeps the node-down test apart from the others.
needs_cluster = pytest.mark.usefixtures("slurm_shared")

WRONG = "def custom_kernel(d):\n    return d * 2\n"
SPIN = "def custom_kernel(d):\n    while True:\n        pass\n"
# The CPU test GPU type: the default partition, no generic resources.
CPU_GPU = GpuType("SLURM-CPU", "slurm", max_concurrent=2, params={"cpus_per_task": 1})


@pytest.fixture
def task(tmp_path: Path) -> Task:
    return load_task(write_task(tmp_path / "task", extra={"test_timeout": 60}))


@pytest.fixture
def launcher(tmp_path: Path) -> SlurmLauncher:
    return SlurmLauncher(tmp_path / "shared", poll_interval=0.3)


@pytest.fixture
def commands(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The programs the launcher runs, in order (it runs them all through this function)."""
    calls: list[str] = []
    real = asyncio.create_subprocess_exec

    async def counting(program: str, *args: str, **kwargs: object) -> asyncio.subprocess.Process:
        calls.append(program)
        return await real(program, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(asyncio, "create_subprocess_exec", counting)
    return calls


def _key() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


def _spinner(marker: str) -> str:
    """A kernel that starts a marked child process and then never returns."""
    return (
        "import subprocess, sys\n"
        "def custom_kernel(d):\n"
        "    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', "
        f"{marker!r}])\n"
        "    while True:\n"
        "        pass\n"
    )


def _processes_in(directory: Path) -> list[int]:
    """Live processes whose working directory is `directory` (the batch script and runner)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cwd").resolve() == directory.resolve():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


async def _until(check: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.2)
    return True


def _request(task: Task, code: str = CORRECT, mode: Mode = Mode.TEST) -> RunRequest:
    return make_request(task, code, mode)


# --- without a cluster: the sbatch command line and the state mapping ---------------------


@pytest.mark.reliability(
    "Access",
    "the bot's environment (its tokens) travelling into a Slurm job",
    "sbatch --export=NONE: nothing of the submitting process's environment reaches the job",
)
def test_sbatch_options_come_from_the_registry_params(task: Task, tmp_path: Path):
    request = _request(task)
    gpu = GpuType(
        "H100-LAB",
        "slurm",
        params={
            "partition": "gpu",
            "account": "lab",
            "gres": "gpu:h100:1",
            "cpus_per_task": 8,
            "mem": "64G",
        },
    )
    command = sbatch_command(request, "job-1-attempt-1", gpu, tmp_path / "job-1-attempt-1")
    minutes = math.ceil(run_timeout(request) / 60)
    assert command[:2] == ["sbatch", "--parsable"]
    assert "--job-name=cm-job-1-attempt-1" in command
    assert f"--time={minutes}" in command
    for option in (
        "--partition=gpu",
        "--account=lab",
        "--gres=gpu:h100:1",
        "--cpus-per-task=8",
        "--mem=64G",
        "--export=NONE",
        f"--chdir={tmp_path / 'job-1-attempt-1'}",
        f"--output={tmp_path / 'job-1-attempt-1' / 'slurm.out'}",
    ):
        assert option in command
    assert command[-1] == str(tmp_path / "job-1-attempt-1" / "job.sh")


@pytest.mark.parametrize(
    ("gres", "gpu_count", "asked"),
    [
        ("gpu:h100:1", 1, "--gres=gpu:h100:1"),
        ("gpu:h100:1", 4, "--gres=gpu:h100:4"),
        ("gpu:h100", 2, "--gres=gpu:h100:2"),
        ("gpu", 8, "--gres=gpu:8"),
        ("gpu:2", 1, "--gres=gpu:1"),
        ("gpu:a100:1,shard:1", 2, "--gres=gpu:a100:2,shard:1"),
    ],
)
def test_a_run_asks_slurm_for_its_own_gpu_count(
    task: Task, tmp_path: Path, gres: str, gpu_count: int, asked: str
):
    """Slurm pins the job to the GPUs of its GRES (CUDA_VISIBLE_DEVICES): one per rank."""
    request = dataclasses.replace(_request(task), gpu_count=gpu_count)
    gpu = GpuType("LAB", "slurm", params={"gres": gres})
    assert asked in sbatch_command(request, "k", gpu, tmp_path / "k")


def test_time_is_rounded_up_to_whole_minutes(tmp_path: Path):
    task = load_task(write_task(tmp_path / "t", extra={"test_timeout": 61}))
    request = _request(task)
    assert run_timeout(request) == 121  # 61 s of tests and 60 s of overhead
    assert "--time=3" in sbatch_command(request, "k", None, tmp_path / "k")


def test_options_not_configured_are_left_out(task: Task, tmp_path: Path):
    command = sbatch_command(_request(task), "k", CPU_GPU, tmp_path / "k")
    assert not any(
        arg.startswith(("--gres", "--partition", "--account", "--mem")) for arg in command
    )
    assert "--cpus-per-task=1" in command
    bare = sbatch_command(_request(task), "k", GpuType("X", "slurm", params={"gres": ""}), tmp_path)
    assert not any(arg.startswith("--gres") for arg in bare)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"partiton": "gpu"}, "unknown Slurm parameter"),
        ({"gres": ["gpu:1"]}, "must be a string or a number"),
        ({"cpus_per_task": True}, "must be a string or a number"),
    ],
)
def test_bad_registry_params_are_refused(task: Task, tmp_path: Path, params, message):
    with pytest.raises(LauncherError, match=message):
        sbatch_command(_request(task), "k", GpuType("X", "slurm", params=params), tmp_path)


@pytest.mark.parametrize(
    ("state", "has_result", "settled", "expected"),
    [
        ("PENDING", False, False, RunState.QUEUED),
        ("CONFIGURING", False, False, RunState.QUEUED),
        ("RUNNING", False, False, RunState.RUNNING),
        ("COMPLETING", True, False, RunState.RUNNING),
        ("COMPLETED", True, False, RunState.FINISHED),
        ("COMPLETED", False, False, RunState.RUNNING),  # the result is still on its way
        ("COMPLETED", False, True, RunState.LOST),
        ("CANCELLED by 0", False, False, RunState.LOST),
        ("TIMEOUT", False, False, RunState.LOST),
        ("FAILED", False, True, RunState.LOST),
        ("NODE_FAIL", True, False, RunState.FINISHED),
    ],
)
def test_slurm_states_map_to_run_states(state, has_result, settled, expected):
    assert slurm_state(state, has_result=has_result, settled=settled) is expected


async def test_missing_commands_and_bad_keys_are_launcher_errors(
    task: Task, launcher: SlurmLauncher, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    for bad in ("../escape", "by-id", "12345"):
        with pytest.raises(LauncherError, match="invalid Slurm run key"):
            await launcher.submit(_request(task), bad)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(LauncherError, match="cannot run sbatch"):
        await launcher.submit(_request(task), _key(), gpu=CPU_GPU)


@pytest.mark.reliability(
    "Faults",
    "a Slurm result file that is corrupt, oversized, or missing along with its run directory",
    "a LauncherError naming the problem each time; no result",
)
async def test_unreadable_results_are_launcher_errors(
    launcher: SlurmLauncher, monkeypatch: pytest.MonkeyPatch, record_property
):
    run_dir = launcher.shared_dir / "k"
    run_dir.mkdir(parents=True)
    launcher.runs.record(run_dir, "424242")
    handle = RunHandle("slurm", "424242")
    errors = []
    (run_dir / "result.json").write_text("{not json")
    with pytest.raises(LauncherError, match="unreadable result") as raised:
        await launcher.result(handle)
    errors.append(str(raised.value))
    monkeypatch.setattr(shared_dir, "MAX_RESULT_BYTES", 4)
    (run_dir / "result.json").write_text('{"passed": true}')
    with pytest.raises(LauncherError, match="larger than 4 bytes") as raised:
        await launcher.result(handle)
    errors.append(str(raised.value))
    with pytest.raises(LauncherError, match="unknown Slurm run") as raised:
        await launcher.result(RunHandle("slurm", "7"))
    errors.append(str(raised.value))
    record_property("observed", " / ".join(errors))


def _fake_command(bin_dir: Path, name: str, output: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / name
    script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{output}\nEOF\n")
    script.chmod(0o755)


async def test_with_accounting_forgotten_jobs_take_one_sacct_call(
    launcher: SlurmLauncher, commands: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    """A cluster with slurmdbd: jobs squeue has purged are looked up in one sacct call."""
    for job_id in ("31", "32", "33"):
        (launcher.shared_dir / f"k{job_id}").mkdir(parents=True)
        launcher.runs.record(launcher.shared_dir / f"k{job_id}", job_id)
    bin_dir = tmp_path / "bin"
    _fake_command(bin_dir, "squeue", "")
    # 33's id was reused by another job: only the name tells them apart.
    _fake_command(bin_dir, "sacct", "31|RUNNING|cm-k31\n32|TIMEOUT|cm-k32\n33|RUNNING|cm-other")
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    states = await launcher.states([launcher.attach(j) for j in ("31", "32", "33")])
    assert states == {"31": RunState.RUNNING, "32": RunState.LOST, "33": RunState.LOST}
    assert commands == ["squeue", "sacct"]


@pytest.mark.reliability(
    "Faults",
    "squeue hangs (an unresponsive slurmctld)",
    "a LauncherError after the command timeout; the poll never hangs",
)
async def test_a_command_that_hangs_is_a_launcher_error(
    launcher: SlurmLauncher, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, record_property
):
    (launcher.shared_dir / "k").mkdir(parents=True)
    launcher.runs.record(launcher.shared_dir / "k", "41")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "squeue").write_text("#!/bin/sh\nexec sleep 30\n")
    (bin_dir / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    launcher.command_timeout = 0.5
    with pytest.raises(LauncherError, match=r"squeue did not answer within 0\.5 s") as raised:
        await launcher.states([launcher.attach("41")])
    record_property("observed", str(raised.value))


# --- on the loopback cluster -----------------------------------------------------------------


@pytest.mark.reliability(
    "Access",
    "the sandbox user reading a Slurm run's payload file, which holds the secret seed",
    "the payload is mode 0600: readable by the launcher's user alone",
)
@needs_cluster
async def test_a_correct_submission_passes_with_progress(
    task: Task, launcher: SlurmLauncher, record_property
):
    events: list[dict] = []
    key = _key()
    handle = await launcher.submit(_request(task, mode=Mode.BENCHMARK), key, gpu=CPU_GPU)
    assert handle.external_id.isdigit()
    # The payload holds the secret seed: the sandbox user (anyone but us) cannot read it.
    mode = (launcher.shared_dir / key / "payload.txt").stat().st_mode & 0o777
    record_property("observed", f"payload.txt mode {mode:04o}")
    assert mode == 0o600
    result = await launcher.follow(handle, timeout=90, on_progress=events.append)
    assert result is not None and result.passed, result and result.message
    assert [e["phase"] for e in events if e["event"] == "phase"] == ["test", "benchmark"]


@needs_cluster
async def test_a_wrong_answer_gets_its_verdict(task: Task, launcher: SlurmLauncher):
    handle = await launcher.submit(_request(task, WRONG), _key(), gpu=CPU_GPU)
    result = await launcher.follow(handle, timeout=90)
    assert result is not None and result.verdict is Verdict.WRONG_ANSWER


@needs_cluster
async def test_states_of_many_runs_take_one_squeue_call(
    task: Task, launcher: SlurmLauncher, commands: list[str]
):
    handles = [await launcher.submit(_request(task, SPIN), _key(), gpu=CPU_GPU) for _ in range(2)]
    ghost = launcher.attach("999999")
    commands.clear()
    try:
        states = await launcher.states([*handles, ghost])
    finally:
        for handle in handles:
            await launcher.cancel(handle)
    assert commands[0] == "squeue" and commands.count("squeue") == 1
    assert "sacct" not in commands  # both are still known to squeue; the ghost has no run
    assert {h.external_id for h in handles} | {"999999"} == set(states)
    assert all(states[h.external_id] in {RunState.QUEUED, RunState.RUNNING} for h in handles)
    assert states["999999"] is RunState.LOST


@pytest.mark.reliability(
    "Faults",
    "Slurm jobs that slurmctld has already purged, one with a result file and one without",
    "finished and lost respectively, with one sacct call at most",
)
@needs_cluster
async def test_forgotten_jobs_are_decided_by_their_result_file(
    launcher: SlurmLauncher, commands: list[str], record_property
):
    """Jobs slurmctld has purged: one sacct call at most (it answers 'disabled' here)."""
    for job_id, key in (("900001", "gone-with-result"), ("900002", "gone-without")):
        (launcher.shared_dir / key).mkdir(parents=True)
        launcher.runs.record(launcher.shared_dir / key, job_id)
    (launcher.shared_dir / "gone-with-result" / "result.json").write_text("{}")
    handles = [launcher.attach("900001"), launcher.attach("900002")]
    first = await launcher.states(handles)
    second = await launcher.states(handles)
    record_property(
        "observed",
        ", ".join(f"{k} {v.value}" for k, v in sorted(first.items()))
        + f"; {commands.count('sacct')} sacct call",
    )
    assert first == second == {"900001": RunState.FINISHED, "900002": RunState.LOST}
    assert commands.count("squeue") == 2
    assert commands.count("sacct") == 1  # asked once, then remembered as absent


@pytest.mark.reliability(
    "Faults",
    "a Slurm job that never finishes: a spinning kernel that also started a child process",
    "cancelled at the timeout with its whole process tree; the run is lost",
)
@needs_cluster
async def test_follow_timeout_cancels_a_spinning_job_and_its_whole_tree(
    task: Task, launcher: SlurmLauncher, record_property
):
    marker = f"cm-slurm-spin-{uuid.uuid4().hex}"
    key = _key()
    handle = await launcher.submit(_request(task, _spinner(marker)), key, gpu=CPU_GPU)
    assert await _until(lambda: bool(processes_with(marker)), 120), "the kernel never started"
    with pytest.raises(RunTimedOutError, match="no result within 2 s") as raised:
        await launcher.follow(handle, timeout=2)
    job_id = handle.external_id
    assert await _until(lambda: squeue_active(job_id) == "", 60), squeue_active(job_id)
    state = (await launcher.states([handle]))[job_id]
    gone = await _until(lambda: not processes_with(marker), 30)
    # The batch script and runner end a moment after the job does (slurmd signals, then
    # reaps them): a leaked one would still be there after this wait.
    run_dir = launcher.shared_dir / key
    await _until(lambda: not _processes_in(run_dir), 30)
    left = _processes_in(run_dir)
    record_property(
        "observed",
        f"{raised.value}; job {state.value}, "
        f"{'no process left' if gone and not left else 'processes left'}",
    )
    assert state is RunState.LOST
    assert gone
    assert left == []


@pytest.mark.reliability(
    "Faults",
    "a successor worker submits the same Slurm key again, while it runs and after it finished",
    "one Slurm job: the same job id every time",
)
@needs_cluster
async def test_the_same_key_twice_is_one_slurm_job(task: Task, tmp_path: Path, record_property):
    key = _key()
    request = _request(task)
    first = SlurmLauncher(tmp_path / "shared", poll_interval=0.3)
    handle = await first.submit(request, key, gpu=CPU_GPU)
    again = await SlurmLauncher(tmp_path / "shared").submit(request, key, gpu=CPU_GPU)
    assert again == handle
    result = await first.follow(handle, timeout=90)
    assert result is not None and result.passed
    # Finished runs are not started again either.
    assert await first.submit(request, key, gpu=CPU_GPU) == handle
    named = jobs_named(f"cm-{key}")
    record_property("observed", f"Slurm jobs named cm-<key>: {named}")
    assert named == [handle.external_id]


@pytest.mark.reliability(
    "Faults",
    "the submitting process died after sbatch answered, before it wrote the job id down",
    "the next submit finds the job by name and adopts it: no second Slurm job",
)
@needs_cluster
async def test_a_job_whose_id_was_never_recorded_is_adopted(
    task: Task, launcher: SlurmLauncher, record_property
):
    """sbatch answered, then the submitting process died before writing the id down."""
    key = _key()
    handle = await launcher.submit(_request(task, SPIN), key, gpu=CPU_GPU)
    try:
        (launcher.shared_dir / key / "slurm_job_id").unlink()
        again = await SlurmLauncher(launcher.shared_dir).submit(_request(task), key, gpu=CPU_GPU)
        named = jobs_named(f"cm-{key}")
        record_property("observed", f"adopted job {again.external_id}; jobs with its name: {named}")
        assert again == handle
        assert named == [handle.external_id]
    finally:
        await launcher.cancel(handle)


@needs_cluster
async def test_a_fresh_launcher_attaches_by_job_id_or_by_key(task: Task, launcher: SlurmLauncher):
    key = _key()
    handle = await launcher.submit(_request(task), key, gpu=CPU_GPU)
    await launcher.follow(handle, timeout=90)
    fresh = SlurmLauncher(launcher.shared_dir)  # as if the process had restarted
    by_id, by_key = fresh.attach(handle.external_id), fresh.attach(key)
    assert by_id == by_key == handle
    assert (await fresh.states([by_id]))[handle.external_id] is RunState.FINISHED
    assert (await fresh.result(by_key)).passed
    assert [e["event"] for e in await fresh.progress(by_id)] == ["phase", "phase_done"]


def _slurm(*command: str) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=True)
    return done.stdout.strip()


def _node_state(node: str) -> str:
    return _slurm("sinfo", "-h", "-N", "-n", node, "-o", "%T").split("\n")[0]


def _job_field(job_id: str, field: str) -> str:
    """One field of `scontrol show job`, e.g. Restarts or NodeList."""
    for word in _slurm("scontrol", "-o", "show", "job", job_id).split():
        name, _, value = word.partition("=")
        if name == field:
            return value
    return ""


async def _bring_back(node: str) -> str:
    """Resumes the node if it is still down or drained; its state once it takes jobs again."""
    if _node_state(node).rstrip("*~#!%$@^-") in {"down", "drained", "draining", "fail"}:
        subprocess.run(
            ["scontrol", "update", f"nodename={node}", "state=resume"],
            capture_output=True,
            timeout=30,
            check=False,  # it may have come back on its own in between
        )
    usable = {"idle", "mixed", "allocated", "completing"}
    await _until(lambda: _node_state(node).rstrip("*~#!%$@^-") in usable, 60)
    return _node_state(node)


@pytest.mark.reliability(
    "Faults",
    "the Slurm node goes down (scontrol state=down) under a running job",
    "Slurm kills and requeues the job: seen as queued, not lost; follow still ends at its timeout",
)
@pytest.mark.usefixtures("slurm_alone")  # taking the node down kills every job on it
async def test_a_node_that_goes_down_requeues_the_job_and_follow_still_ends(
    task: Task, launcher: SlurmLauncher, record_property
):
    marker = f"cm-slurm-node-down-{uuid.uuid4().hex}"
    handle = await launcher.submit(_request(task, _spinner(marker)), _key(), gpu=CPU_GPU)
    job_id = handle.external_id
    node = ""
    seen: list[str] = []
    try:
        assert await _until(lambda: bool(processes_with(marker)), 120), "the kernel never started"
        node = _job_field(job_id, "NodeList")
        assert node and node != "(null)", node
        seen.append((await launcher.states([handle]))[job_id].value)
        # slurm_alone keeps this session's tests off the node; another session's jobs would die.
        if not await _until(lambda: _slurm("squeue", "-h", "-o", "%i").split() == [job_id], 120):
            pytest.skip(f"jobs of another session are on the cluster: {_slurm('squeue', '-h')}")

        _slurm("scontrol", "update", f"nodename={node}", "state=down", "reason=cm-test-node-down")
        killed = await _until(lambda: not processes_with(marker), 30)
        state = (await launcher.states([handle]))[job_id]
        seen.append(state.value)
        restarts = _job_field(job_id, "Restarts")
        began = time.monotonic()
        with pytest.raises(RunTimedOutError, match="no result within 3 s") as raised:
            await launcher.follow(handle, timeout=3)
        followed = time.monotonic() - began
        ended = await _until(lambda: squeue_active(job_id) == "", 60)
        seen.append((await launcher.states([handle]))[job_id].value)
    finally:
        try:  # the node first: the tests after this one need it
            node_after = await _bring_back(node) if node else ""
        finally:
            await launcher.cancel(handle)

    record_property(
        "observed",
        f"states {' -> '.join(seen)}; Slurm requeued the job (Restarts={restarts}), its kernel "
        f"{'was killed' if killed else 'kept running'}; {raised.value} after {followed:.1f} s; "
        f"node {node} {node_after} again",
    )
    assert killed, "the kernel outlived its node"
    assert state is RunState.QUEUED  # requeued by Slurm: neither lost nor finished
    assert restarts == "1"
    assert ended, squeue_active(job_id)
    assert seen == ["running", "queued", "lost"]
    assert node_after.rstrip("*~#!%$@^-") in {"idle", "mixed", "allocated", "completing"}


@needs_cluster
async def test_sbatch_refusals_carry_slurms_message(task: Task, launcher: SlurmLauncher):
    gpu = GpuType("NOPE", "slurm", params={"partition": "no-such-partition"})
    with pytest.raises(LauncherError, match=r"sbatch failed .*invalid partition"):
        await launcher.submit(_request(task), _key(), gpu=gpu)


@pytest.mark.reliability(
    "Sandbox",
    "reading other competitors' payloads (their code) left in the Slurm shared directory",
    "the runner removes the payload once read; the run directory goes once the result is stored",
)
@needs_cluster
async def test_a_collected_run_leaves_nothing_in_the_shared_directory(
    task: Task, launcher: SlurmLauncher, record_property
):
    key = _key()
    handle = await launcher.submit(_request(task), key, gpu=CPU_GPU)
    result = await launcher.follow(handle, timeout=90)
    assert result is not None and result.passed
    run_dir = launcher.shared_dir / key
    assert not (run_dir / "payload.txt").exists()  # the runner took it before the task ran
    await launcher.release(handle)
    assert not run_dir.exists()
    assert not (launcher.shared_dir / "by-id" / handle.external_id).is_symlink()
    left = sorted(p.name for p in launcher.shared_dir.iterdir())
    record_property("observed", f"shared directory after release: {left}")
    assert left == ["by-id"]


async def test_the_sweep_removes_only_stale_runs_nobody_collects(launcher: SlurmLauncher):
    stale, fresh = launcher.shared_dir / "stale-run", launcher.shared_dir / "fresh-run"
    for run_dir in (stale, fresh):
        run_dir.mkdir(parents=True, mode=0o700)
        (run_dir / "payload.txt").write_text("someone's code")
    old = time.time() - STALE_RUN_S - 60
    for path in (stale / "payload.txt", stale):
        os.utime(path, (old, old))
    assert await launcher.sweep() == ["stale-run"]
    assert not stale.exists() and (fresh / "payload.txt").is_file()


async def test_a_slow_shared_directory_never_blocks_the_event_loop(
    launcher: SlurmLauncher, monkeypatch: pytest.MonkeyPatch
):
    """A network file system that takes a second per read: leases are renewed meanwhile."""
    (launcher.shared_dir / "by-id").mkdir(parents=True)
    (launcher.shared_dir / "by-id" / "123").symlink_to("../some-run")
    real = shared_dir._read_job_id

    def slow(run_dir: Path) -> str | None:
        time.sleep(1.0)
        return real(run_dir)

    monkeypatch.setattr(shared_dir, "_read_job_id", slow)
    gaps: list[float] = []

    async def ticker() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.01)
            gaps.append(time.monotonic() - last)
            last = time.monotonic()

    ticking = asyncio.create_task(ticker())
    handle = RunHandle("slurm", "123")
    assert await launcher.progress(handle) == []
    with pytest.raises(LauncherError, match="unknown Slurm run"):
        await launcher.result(handle)
    assert await launcher.states([handle]) == {"123": RunState.LOST}
    ticking.cancel()
    assert gaps and max(gaps) < 0.8, max(gaps)  # well under one read: never waited for one
