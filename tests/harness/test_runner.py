"""The runner entrypoint and the built-in harness, end to end, on small tasks written here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cluster_manager.core import protocol
from cluster_manager.core.models import Limits, Mode, ScriptMode, Verdict
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.task import load_task
from cluster_manager.harness.trusted import MIN_PAIRS
from tests.conftest import CORRECT, make_request, processes_with, run_code, write_task


def test_correct_submission_passes_every_test(identity_task):
    result = run_code(identity_task, CORRECT)
    assert result.passed, result.message
    assert result.verdict is Verdict.PASSED
    assert [t.spec for t in result.tests] == ["size: 8; seed: 1", "size: 33; seed: 2"]
    assert all(t.passed for t in result.tests)
    assert result.score is None  # only ranked runs are scored
    assert result.system["device"] == "CPU"
    assert result.durations["total"] >= result.durations["test"] > 0
    # The JSON contract round-trips exactly.
    assert RunResult.from_json(json.loads(json.dumps(result.to_json()))) == result


def test_wrong_answer_names_the_failing_test(identity_task):
    code = """
    def custom_kernel(data):
        out = data.clone()
        if out.numel() > 10:
            out[0] += 1
        return out
    """
    result = run_code(identity_task, code)
    assert result.verdict is Verdict.WRONG_ANSWER
    assert not result.passed
    assert [t.passed for t in result.tests] == [True, False]
    assert "1 elements differ" in result.tests[1].error
    assert "test 1 failed" in result.message


def test_exception_in_kernel_is_a_runtime_error_with_its_traceback(identity_task):
    code = """
    def custom_kernel(data):
        raise ValueError("kernel exploded")
    """
    result = run_code(identity_task, code)
    assert result.verdict is Verdict.RUNTIME_ERROR
    assert "ValueError: kernel exploded" in result.tests[0].error


def test_import_error_in_submission_is_a_runtime_error(identity_task):
    result = run_code(identity_task, "import no_such_module\ndef custom_kernel(d):\n    return d\n")
    assert result.verdict is Verdict.RUNTIME_ERROR
    assert "no_such_module" in result.tests[0].error


@pytest.mark.reliability(
    "Anti-cheat",
    "calling `os._exit(0)` inside the kernel, hoping a clean exit reads as a pass",
    "runtime_error: exited before returning a result",
)
def test_exiting_early_with_status_zero_is_not_a_pass(identity_task, record_property):
    code = """
    import os
    def custom_kernel(data):
        os._exit(0)
    """
    result = run_code(identity_task, code)
    record_property("observed", f"{result.verdict.value}: {result.message}")
    assert result.verdict is Verdict.RUNTIME_ERROR
    assert "exited before returning a result" in result.tests[0].error


@pytest.mark.reliability(
    "Anti-cheat",
    "printing `check: pass` and per-test pass lines on stdout and stderr, returning zeros",
    "wrong_answer; the lines are captured output, never believed",
)
def test_printing_fake_results_changes_nothing(identity_task, record_property):
    code = """
    import sys
    def custom_kernel(data):
        print("check: pass\\ntest.0.status: pass\\ntest.1.status: pass")
        print("check: pass", file=sys.stderr)
        return data * 0
    """
    result = run_code(identity_task, code)
    record_property("observed", f"{result.verdict.value}: {result.message}")
    assert result.verdict is Verdict.WRONG_ANSWER
    assert "check: pass" in result.phases[0].stdout  # captured, but never believed


@pytest.mark.reliability(
    "Anti-cheat",
    "zeroing the input tensor in place and returning it",
    "wrong_answer (the kernel only gets a clone)",
)
def test_mutating_inputs_cannot_make_the_check_pass(identity_task, record_property):
    code = """
    def custom_kernel(data):
        data.zero_()          # the kernel only ever gets a clone
        return data
    """
    result = run_code(identity_task, code)
    record_property("observed", f"{result.verdict.value}: {result.message}")
    assert result.verdict is Verdict.WRONG_ANSWER


@pytest.mark.reliability(
    "Sandbox",
    "reading every POPCORN_* variable (result pipe, secret seed) from the kernel's environment",
    "passed; the kernel sees no POPCORN_* variable",
)
def test_submission_never_sees_the_pipe_or_the_secret_seed(tmp_path: Path, record_property):
    seen = tmp_path / "seen.jsonl"
    task = load_task(write_task(tmp_path / "t"))
    code = f"""
    import json, os
    def custom_kernel(data):
        with open({str(seen)!r}, "a") as fh:
            fh.write(json.dumps({{k: v for k, v in os.environ.items() if "POPCORN" in k}}) + "\\n")
        return data.clone()
    """
    result = run_code(task, code, Mode.LEADERBOARD, seed=987654)
    assert result.passed, result.message
    envs = [json.loads(line) for line in seen.read_text().splitlines()]
    leaked = sorted({key for env in envs for key in env})
    record_property(
        "observed",
        f"{result.verdict.value}; POPCORN_* variables seen in {len(envs)} kernel calls: "
        f"{leaked or 'none'}",
    )
    assert envs and all(env == {} for env in envs)


@pytest.mark.reliability(
    "Anti-cheat",
    "predicting ranked inputs from the task's public seeds",
    "ranked inputs use the secret-mixed seed, and a fresh one for every timed iteration",
)
def test_ranked_mode_mixes_the_secret_into_every_case_seed(tmp_path: Path, record_property):
    seeds = tmp_path / "seeds.txt"
    reference = f"""
    import torch
    def generate_input(size, seed):
        with open({str(seeds)!r}, "a") as fh:
            fh.write(f"{{seed}}\\n")
        return torch.full((size,), float(seed % 1000))
    def ref_kernel(data):
        return data.clone()
    def check_implementation(data, output):
        return "" if torch.equal(data, output) else "mismatch"
    """
    task = load_task(write_task(tmp_path / "t", reference=reference))
    secret = 4242
    result = run_code(task, CORRECT, Mode.LEADERBOARD, seed=secret)
    assert result.passed, result.message
    seen = [int(s) for s in seeds.read_text().split()]
    public = {1, 2, 3}
    base = protocol.combine_seed(3, secret)
    ranked = [s for s in seen if s not in public]
    record_property(
        "observed",
        f"{result.verdict.value}; {len(set(ranked))} distinct ranked seeds, "
        f"first is the secret-mixed one: {bool(ranked) and ranked[0] == base}",
    )
    # First the ranked case's own seed, then a fresh one for every timed iteration.
    assert ranked[0] == base
    assert len(set(ranked)) > 3
    assert all(s >= base for s in ranked)


def test_leaderboard_mode_scores_by_the_tasks_ranking(tmp_path: Path):
    task = load_task(
        write_task(
            tmp_path / "t",
            benchmarks=[{"size": 64, "seed": 5}, {"size": 4096, "seed": 6}],
            extra={"ranking_by": "geom"},
        )
    )
    result = run_code(task, CORRECT, Mode.LEADERBOARD, seed=11)
    assert result.passed, result.message
    ranked = result.phases[-1]
    assert [p.name for p in result.phases] == ["test", "leaderboard"]
    means = [b.mean for b in ranked.benchmarks]
    assert all(b.runs >= 3 and b.best <= b.mean <= b.worst for b in ranked.benchmarks)
    expected = (means[0] * means[1]) ** 0.5 / 1e9
    assert result.score == pytest.approx(expected)


def test_a_request_may_time_each_benchmark_case_for_less(identity_task):
    """`leaderboard check` asks for a short look at each case. A kernel this noisy never
    reaches the stop rule's precision, so it is timed until its budget runs out: about 1,500
    calls of 1-3 ms in the harness's own 3 s, at most 0.1 s / 1 ms in a budget of 0.1 s."""
    noisy = """
    import random, time
    def custom_kernel(data):
        time.sleep(random.uniform(0.001, 0.003))
        return data.clone()
    """
    limits = Limits(memory_bytes=8 << 30, benchmark_case_s=0.1)
    result = run_code(identity_task, noisy, Mode.BENCHMARK, limits=limits)
    assert result.passed, result.message
    assert result.benchmarks and all(3 <= b.runs <= 100 for b in result.benchmarks), [
        b.runs for b in result.benchmarks
    ]


def test_a_slow_case_gets_its_minimum_of_pairs(identity_task):
    """Each call takes 40 ms and its replay as long: a 0.05 s budget holds one pair, and one
    preemption would then move the score by its whole delay. The phase has time to spare, so
    each case is timed past its budget until it has `MIN_PAIRS`, which the trim needs."""
    slow = """
    import time
    def custom_kernel(data):
        time.sleep(0.04)
        return data.clone()
    """
    limits = Limits(memory_bytes=8 << 30, benchmark_case_s=0.05)
    result = run_code(identity_task, slow, Mode.LEADERBOARD, limits=limits)
    assert result.passed, result.message
    ranked = result.phases[-1]
    assert ranked.benchmarks and all(
        MIN_PAIRS <= b.runs <= 2 * MIN_PAIRS for b in ranked.benchmarks
    ), [b.runs for b in ranked.benchmarks]


def test_benchmark_mode_runs_tests_first_and_stops_on_failure(identity_task):
    result = run_code(
        identity_task, "def custom_kernel(data):\n    return data + 1\n", Mode.BENCHMARK
    )
    assert result.verdict is Verdict.WRONG_ANSWER
    assert [p.name for p in result.phases] == ["test"]


def test_profile_mode_returns_a_profiler_table(identity_task):
    result = run_code(identity_task, CORRECT, Mode.PROFILE)
    assert result.passed, result.message
    report = result.benchmarks[0].report
    assert "Self CPU" in report and "aten::clone" in report


@pytest.mark.reliability(
    "Sandbox",
    "allocating 64 GiB in the kernel (6 GiB memory limit)",
    "memory_limit",
)
def test_memory_bomb_is_a_memory_limit(identity_task, record_property):
    code = """
    import torch
    def custom_kernel(data):
        hog = torch.empty(64 << 30, dtype=torch.uint8)   # 64 GiB
        return data.clone()
    """
    result = run_code(identity_task, code, limits=Limits(memory_bytes=6 << 30))
    error = [line for t in result.tests for line in t.error.strip().splitlines()[-1:]]
    record_property("observed", f"{result.verdict.value}: {' '.join(error[:1]) or result.message}")
    assert result.verdict is Verdict.MEMORY_LIMIT, result.message


@pytest.mark.reliability(
    "Sandbox",
    "writing 2 MB to stdout from the kernel",
    "passed; captured stdout capped under 17 KiB, keeping its end",
)
@pytest.mark.parametrize(("ours", "theirs"), [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_openmp_threads_wait_passively_unless_the_host_says_otherwise(
    identity_task, monkeypatch, ours, theirs
):
    if ours is None:
        monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    else:
        monkeypatch.setenv("OMP_WAIT_POLICY", ours)
    code = """
    import os
    print("policy:", os.environ.get("OMP_WAIT_POLICY"), flush=True)
    def custom_kernel(data):
        return data.clone()
    """
    result = run_code(identity_task, code)
    assert result.passed, result.message
    assert f"policy: {theirs}" in result.phases[0].stdout


def test_output_is_captured_but_capped(identity_task, record_property):
    code = """
    import sys
    def custom_kernel(data):
        sys.stdout.write("x" * 2_000_000 + "THE-END")
        return data.clone()
    """
    result = run_code(identity_task, code)
    assert result.passed
    stdout = result.phases[0].stdout
    record_property(
        "observed",
        f"{result.verdict.value}; {len(stdout.encode())} bytes of stdout kept, "
        f"ends with THE-END: {stdout.endswith('THE-END')}",
    )
    assert len(stdout.encode()) < 17 * 1024
    assert "bytes omitted" in stdout and stdout.endswith("THE-END")


def test_bad_run_request_is_an_internal_error_not_a_crash(identity_task):
    from cluster_manager.core.models import TaskFile
    from cluster_manager.harness import runner

    bad = make_request(identity_task, CORRECT)
    object.__setattr__(bad.task, "files", (*bad.task.files, TaskFile("../escape.py", "x")))
    result = runner.run(bad)
    assert result.verdict is Verdict.INTERNAL_ERROR
    assert "unsafe file name" in result.message


# --- through the entrypoint process (child subreaper, whole-tree kill) -----------------------


def _run_entrypoint(request, tmp_path: Path) -> tuple[RunResult, float]:
    request_file = tmp_path / "request.json"
    request_file.write_text(json.dumps(request.to_json()))
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "cluster_manager.harness.runner", "--request", str(request_file)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return RunResult.from_json(json.loads(done.stdout)), time.monotonic() - began


@pytest.mark.reliability(
    "Sandbox",
    "spinning forever after starting a grandchild in its own session (4 s test timeout)",
    "a worker may not leave its process group (EPERM), so the grandchild stays in it; "
    "timeout within timeout + 5 s; the grandchild is killed too",
)
def test_kernel_that_never_returns_times_out_and_leaves_nothing_behind(
    tmp_path: Path, record_property
):
    marker = f"cm-test-marker-{os.getpid()}-{time.time_ns()}"
    task = load_task(write_task(tmp_path / "t", extra={"test_timeout": 4}))
    code = f"""
    import subprocess, sys
    def custom_kernel(data):
        # A grandchild in its own session (refused: then in the worker's), then a loop that
        # never ends.
        command = [sys.executable, "-c", "import time; time.sleep(600)", {marker!r}]
        try:
            subprocess.Popen(command, start_new_session=True)
        except PermissionError:
            subprocess.Popen(command)
        while True:
            pass
    """
    result, elapsed = _run_entrypoint(make_request(task, textwrap.dedent(code)), tmp_path)
    record_property("observed", f"{result.verdict.value}: {result.message}")
    assert result.verdict is Verdict.TIMEOUT, result.message
    assert "4 s" in result.message
    # The phase is killed within timeout + 5 s; the whole entrypoint process adds only its
    # own start-up and clean-up (generous: a loaded 2-core machine starts Python slowly).
    assert result.phases[0].duration_s < 4 + 5, result.phases[0].duration_s
    assert elapsed < 4 + 5 + 30, elapsed
    time.sleep(0.2)
    leftovers = processes_with(marker)
    record_property(
        "observed",
        f"{result.verdict.value}: {result.message}; phase killed after "
        f"{result.phases[0].duration_s:.1f} s, {len(leftovers)} processes left",
    )
    assert leftovers == []


@pytest.mark.reliability(
    "Sandbox",
    "leaving a 10-minute background process in its own session behind a passing kernel",
    "passed; the background process is killed when the run ends",
)
def test_background_process_started_by_a_passing_kernel_is_killed(tmp_path: Path, record_property):
    marker = f"cm-test-daemon-{os.getpid()}-{time.time_ns()}"
    task = load_task(write_task(tmp_path / "t"))
    code = f"""
    import os, subprocess, sys
    def custom_kernel(data):
        command = [sys.executable, "-c", "import time; time.sleep(600)", {marker!r}]
        quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            subprocess.Popen(command, start_new_session=True, **quiet)
        except PermissionError:  # a worker may not leave its group: then in it
            subprocess.Popen(command, **quiet)
        return data.clone()
    """
    result, _ = _run_entrypoint(make_request(task, textwrap.dedent(code)), tmp_path)
    record_property("observed", f"{result.verdict.value}: {result.message}")
    assert result.passed, result.message
    time.sleep(0.2)
    leftovers = processes_with(marker)
    record_property("observed", f"{result.verdict.value}; {len(leftovers)} processes left")
    assert leftovers == []


def test_script_mode_runs_the_file_as_is_and_keeps_its_output():
    from cluster_manager.core.phases import script_task

    task = script_task("experiment.py", timeout_s=20)
    ok = run_code(task, "import sys\nprint('hello from the GPU')\nsys.exit(0)\n", ScriptMode.SCRIPT)
    assert ok.passed and ok.verdict is Verdict.PASSED
    assert "hello from the GPU" in ok.phases[0].stdout
    failing = run_code(task, "raise SystemExit(3)\n", ScriptMode.SCRIPT)
    assert failing.verdict is Verdict.RUNTIME_ERROR and "status 3" in failing.message
    endless = run_code(
        script_task("e.py", timeout_s=2), "while True:\n    pass\n", ScriptMode.SCRIPT
    )
    assert endless.verdict is Verdict.TIMEOUT
