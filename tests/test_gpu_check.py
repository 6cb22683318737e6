"""The GPU check's parts that need no GPU (docs/GPU.md): its table and exit code, rows that
raise or hang, --only/--skip, the refusal of a machine without a GPU, which problem sets a GPU
stands in for, the verdicts on what the project's commands print, and what it carries."""

from __future__ import annotations

import base64
import importlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from cluster_manager.core.gpus import parse_registry
from cluster_manager.core.run_results import RunResult

ROOT = Path(__file__).resolve().parents[1]
CHECK = ROOT / "scripts" / "gpu" / "check"
# The check lives beside its script, not in the package: imported from there.
sys.path.insert(0, str(ROOT / "scripts" / "gpu"))
outcome = importlib.import_module("gpu_check.outcome")
machine = importlib.import_module("gpu_check.machine")
problem_sets = importlib.import_module("gpu_check.problem_sets")
judges = importlib.import_module("gpu_check.judges")
rows_runner = importlib.import_module("gpu_check.rows_runner")
rows = importlib.import_module("gpu_check.rows")
setting = importlib.import_module("gpu_check.setting")
entry = importlib.import_module("gpu_check.__main__")

H100 = machine.Facts(
    nvidia_smi="/usr/bin/nvidia-smi",
    torch="2.11.0+cu130",
    torch_cuda="13.0",
    cuda_available=True,
    device="NVIDIA H100 80GB HBM3",
    capability=(9, 0),
    device_count=1,
)


def row(name: str, body, *, limit_s: float = 10.0, quiet: bool = False):
    return outcome.Row(name, f"the {name} row", body, limit_s, quiet)


def a_setting(tmp_path: Path):
    return rows_runner.Setting(
        root=ROOT,
        work=tmp_path,
        carry=tmp_path / "carry",
        examples=tmp_path,
        env=dict(os.environ),
        facts={},
    )


def result(name: str, status: str, figures: str = "figures") -> object:
    return outcome.RowResult(name, f"the {name} row", outcome.Outcome(status, figures), 1.0)


# The table and the exit code.


def test_the_table_shows_the_machine_then_one_line_per_row_and_the_totals():
    header = machine.header(H100, "/usr/bin/bwrap (bubblewrap 0.8.0)")
    results = [
        result("timing", "pass", "harness 0.2010 ms, do_bench 0.1990 ms, ratio 1.010"),
        result("hostile", "fail", "4 tests: 1 failed, 0 skipped"),
        result("problem-sets", "skipped", "no problem sets carried"),
    ]
    text = outcome.render_table(header, results)
    lines = text.splitlines()
    assert lines[0].startswith("date ") and "UTC" in lines[0]
    assert "NVIDIA H100 80GB HBM3 (×1, compute capability 9.0)" in text
    assert "torch built for 13.0" in text and "2.11.0+cu130" in text
    assert re.search(r"^timing\s+pass\s+1 s\s+harness 0.2010 ms", text, re.M)
    assert re.search(r"^hostile\s+FAIL\s+1 s\s+4 tests", text, re.M)
    assert re.search(r"^problem-sets\s+skipped\s+1 s\s+no problem sets carried", text, re.M)
    assert lines[-1] == "1 passed, 1 failed, 1 skipped"
    assert socket.gethostname() not in text.split()


@pytest.mark.parametrize(
    ("statuses", "code"),
    [
        (["pass", "pass"], 0),
        (["pass", "skipped"], 0),
        (["pass", "fail", "skipped"], 1),
        (["fail"], 1),
    ],
)
def test_the_exit_code_is_1_only_when_a_row_failed(statuses, code):
    assert outcome.exit_code([result(f"r{i}", s) for i, s in enumerate(statuses)]) == code


def test_a_skipped_row_must_say_why():
    with pytest.raises(ValueError, match="must say why"):
        outcome.skipped("  ")
    assert outcome.skipped("no problem sets carried").status == "skipped"


def test_details_put_failures_first():
    results = [
        outcome.RowResult("a", "A", outcome.passed("ok", "a's notes"), 1.0),
        outcome.RowResult("b", "B", outcome.failed("broken", "b's error"), 1.0),
    ]
    text = outcome.render_details(results)
    assert text.index("b's error") < text.index("a's notes")


# Running the rows.


def test_a_row_that_raises_or_hangs_fails_and_the_others_still_run(tmp_path):
    release = threading.Event()

    def raises(ctx):
        raise RuntimeError("the driver said no")

    def hangs_in_python(ctx):
        release.wait(30)
        return outcome.passed("too late")

    def hangs_in_its_command(ctx):
        ctx.run(["sh", "-c", "echo $$ > pid; exec sleep 30"], cwd=tmp_path)
        return outcome.passed("too late")

    def works(ctx):
        done = ctx.run(["echo", "fine"])
        return outcome.passed(done.stdout.strip())

    chosen = [
        row("raises", raises),
        row("hangs", hangs_in_python, limit_s=0.5),
        row("command", hangs_in_its_command, limit_s=1.0),
        row("works", works),
    ]
    began = time.monotonic()
    try:
        results = rows_runner.run_rows(chosen, a_setting(tmp_path), budget_s=30, progress=False)
    finally:
        release.set()
    assert time.monotonic() - began < 15
    by_name = {r.name: r.outcome for r in results}
    assert [r.name for r in results] == ["raises", "hangs", "command", "works"]
    assert by_name["raises"].status == "fail"
    assert "RuntimeError: the driver said no" in by_name["raises"].figures
    assert "Traceback" in by_name["raises"].details
    assert by_name["hangs"].status == "fail" and "did not finish" in by_name["hangs"].figures
    assert by_name["command"].status == "fail"
    assert by_name["works"] == outcome.passed("fine")
    # The hung command was killed with its row, not left behind.
    pid = int((tmp_path / "pid").read_text())
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return "zombie"


def test_rows_left_when_the_checks_time_is_up_fail_as_not_run(tmp_path):
    def slow(ctx):
        ctx.run(["sleep", "30"])
        return outcome.passed("too late")

    chosen = [row("slow", slow, quiet=True), row("later", lambda ctx: outcome.passed("ok"))]
    results = rows_runner.run_rows(chosen, a_setting(tmp_path), budget_s=1.0, progress=False)
    assert "check's deadline" in results[0].outcome.figures
    assert results[1].outcome == outcome.failed("not run: the check's time ran out")


def test_quiet_rows_run_alone_and_first(tmp_path):
    spans: dict[str, tuple[float, float]] = {}

    def timed(name):
        def body(ctx):
            began = time.monotonic()
            time.sleep(0.3)
            spans[name] = (began, time.monotonic())
            return outcome.passed(name)

        return body

    chosen = [
        row("a", timed("a")),
        row("quiet1", timed("quiet1"), quiet=True),
        row("b", timed("b")),
        row("quiet2", timed("quiet2"), quiet=True),
    ]
    results = rows_runner.run_rows(chosen, a_setting(tmp_path), budget_s=30, progress=False)
    assert [r.name for r in results] == ["a", "quiet1", "b", "quiet2"]  # the table's order
    assert spans["quiet1"][1] <= spans["quiet2"][0]
    assert spans["quiet2"][1] <= min(spans["a"][0], spans["b"][0])
    assert spans["a"][0] < spans["b"][1] and spans["b"][0] < spans["a"][1]  # together


def test_only_and_skip_choose_the_rows():
    names = [r.name for r in rows.ROWS]
    assert len(set(names)) == len(names)
    assert [r.name for r in rows.select_rows(rows.ROWS, ["timing", "hostile"], None)] == [
        "timing",
        "hostile",
    ]
    kept = [r.name for r in rows.select_rows(rows.ROWS, None, ["problem-sets", "profile"])]
    by_default = [r.name for r in rows.ROWS if r.by_default]
    assert kept == [n for n in by_default if n not in ("problem-sets", "profile")]
    # The ranked spread takes a second call of its own: only --only runs it.
    assert "ranked-spread" in names and "ranked-spread" not in by_default
    assert [r.name for r in rows.select_rows(rows.ROWS, ["ranked-spread"], None)] == [
        "ranked-spread"
    ]
    with pytest.raises(ValueError, match="unknown row\\(s\\) nope"):
        rows.select_rows(rows.ROWS, ["nope"], None)


def test_the_rows_have_the_issues_checks_and_fit_a_run(tmp_path):
    names = {r.name for r in rows.ROWS}
    assert {"examples-check", "examples-eval", "examples-ranked"} <= names
    assert {"sandbox-root", "sandbox-user"} <= names
    assert {"telemetry", "profile", "timing", "hostile", "problem-sets"} <= names
    assert all(r.limit_s <= entry.BUDGET_S for r in rows.ROWS)
    # Ranked runs and timings run alone: a ranked call's honest replay fails on a busy machine.
    quiet = {r.name for r in rows.ROWS if r.quiet}
    assert quiet == {"examples-ranked", "telemetry", "timing", "hostile", "ranked-spread"}


# The whole check, with rows of its own and a machine said to have a GPU.


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.setenv("GPU_CHECK_WORK", str(tmp_path / "work"))
    monkeypatch.delenv("GPU_CHECK_INSTALL_LOG", raising=False)
    return tmp_path


def test_the_check_prints_its_table_last_and_writes_its_report(work, capsys):
    fake_rows = [
        row("first", lambda ctx: outcome.passed("12 of 12 pass")),
        row("second", lambda ctx: outcome.skipped("no problem sets carried")),
    ]
    code = entry.main(["--out", str(work / "out")], rows=fake_rows, probe=lambda: H100)
    printed = capsys.readouterr().out.rstrip().splitlines()
    assert code == 0
    assert printed[-1] == "1 passed, 0 failed, 1 skipped"
    assert any(re.match(r"first\s+pass\s+\d+ s\s+12 of 12 pass", line) for line in printed)
    report = json.loads((work / "out" / "gpu-check.json").read_text())
    assert report["exit_code"] == 0
    assert [r["outcome"] for r in report["rows"]] == ["pass", "skipped"]
    assert report["header"]["device"].startswith("NVIDIA H100")
    assert (work / "out" / "gpu-check.txt").read_text().rstrip().endswith("0 failed, 1 skipped")
    # The registry the rows' commands get: the GPU type, on this machine's launcher.
    registry = yaml.safe_load((work / "work" / "gpus.yml").read_text())
    assert parse_registry(registry).get("H100").launcher == "local"


def test_a_failed_row_makes_the_check_exit_1_and_says_why_before_the_table(work, capsys):
    fake_rows = [
        row("good", lambda ctx: outcome.passed("fine")),
        row("bad", lambda ctx: outcome.failed("ratio 1.31", "the ratio is outside 1 ± 0.05")),
    ]
    code = entry.main(["--out", str(work / "out")], rows=fake_rows, probe=lambda: H100)
    out = capsys.readouterr().out
    assert code == 1
    assert out.index("the ratio is outside") < out.index("row ")
    assert out.rstrip().endswith("1 passed, 1 failed, 0 skipped")


def test_only_and_skip_reach_the_rows_and_unknown_names_are_refused(work, capsys):
    fake_rows = [row(n, lambda ctx: outcome.passed("ok")) for n in ("one", "two", "three")]
    entry.main(["--only", "two", "--out", str(work / "o")], rows=fake_rows, probe=lambda: H100)
    report = json.loads((work / "o" / "gpu-check.json").read_text())
    assert [r["name"] for r in report["rows"]] == ["two"]
    entry.main(["--skip", "two", "--out", str(work / "p")], rows=fake_rows, probe=lambda: H100)
    report = json.loads((work / "p" / "gpu-check.json").read_text())
    assert [r["name"] for r in report["rows"]] == ["one", "three"]
    capsys.readouterr()
    assert entry.main(["--only", "four"], rows=fake_rows, probe=lambda: H100) == 2
    assert "unknown row(s) four" in capsys.readouterr().err


# The refusal without a GPU: before anything is installed or run.


def _check(tmp_path: Path, path: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PATH": path,
        "PYTHON": sys.executable,  # this suite's Python: torch is there, without CUDA
        "GPU_CHECK_CARRY": str(tmp_path / "carry"),
    }
    return subprocess.run(
        ["bash", str(CHECK), *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_the_check_refuses_a_machine_without_a_gpu_in_one_line(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    before = set(Path("/tmp").glob("cm-gpu-check.*"))
    done = _check(tmp_path, f"{empty}:/usr/bin:/bin")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("gpu check refused: no usable CUDA device: ")
    if shutil.which("nvidia-smi", path="/usr/bin:/bin") is None:
        assert "nvidia-smi is not on PATH" in done.stderr
    assert "sees no CUDA device" in done.stderr  # the suite's torch is the CPU build
    assert set(Path("/tmp").glob("cm-gpu-check.*")) == before  # nothing was installed


def test_a_machine_whose_torch_sees_no_gpu_is_refused_too(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed'\nexit 9\n")
    (fake / "nvidia-smi").chmod(0o755)
    done = _check(tmp_path, f"{fake}:/usr/bin:/bin", "--only", "timing")
    assert done.returncode == 2
    assert "nvidia-smi" not in done.stderr
    assert "torch.cuda.is_available()" in done.stderr


def test_the_refusal_says_when_torch_cannot_be_imported():
    facts = machine.Facts(nvidia_smi="/usr/bin/nvidia-smi", torch_error="ModuleNotFoundError: x")
    assert machine.refusal(facts) == (
        "gpu check refused: no usable CUDA device: torch cannot be imported "
        "(ModuleNotFoundError: x)"
    )
    assert machine.refusal(H100) is None


def test_the_check_lists_its_rows_without_a_gpu(tmp_path):
    done = _check(tmp_path, "/usr/bin:/bin", "--list")
    assert done.returncode == 0
    assert [line.split()[0] for line in done.stdout.splitlines()] == [r.name for r in rows.ROWS]


# Which public problem sets a GPU stands in for.


def _problem_set(root: Path) -> Path:
    problems = root / "reference-kernels" / "problems"
    files = {
        "pmpp_v2.yaml": [("grayscale_v2", "pmpp_v2/grayscale_py", ["B200", "H100", "A100", "L4"])],
        "beta.yaml": [("vectoradd", "pmpp/vectoradd_py", ["H100", "A100", "T4", "L4"])],
        "amd.yaml": [("amd-identity", "amd/identity", ["MI300"])],
        "nvidia.yaml": [("nvfp4_gemv", "nvidia/nvfp4_gemv", ["NVIDIA"])],
        "linalg.yaml": [("qr", "linalg/qr_py", ["B200"])],
        "mixed.yaml": [("old", "mixed/old_py", ["A100"]), ("new", "mixed/new_py", ["B200"])],
    }
    for name, listed in files.items():
        entries = [{"directory": d, "name": n, "gpus": g} for n, d, g in listed]
        for _, directory, _ in listed:
            (problems / directory).mkdir(parents=True, exist_ok=True)
            (problems / directory / "task.yml").write_text("lang: py\n")
        (problems / name).write_text(yaml.safe_dump({"name": name, "problems": entries}))
    (problems / "broken.yaml").write_text("problems: 3\n")
    return problems


def test_an_h100_stands_in_for_older_gpus_and_its_own_kind_only():
    hopper = (9, 0)
    assert all(problem_sets.stands_in(hopper, g) for g in ("T4", "A100", "L4", "H100", "H200"))
    assert not any(
        problem_sets.stands_in(hopper, g) for g in ("B200", "B200_Nebius", "NVIDIA", "MI300")
    )
    # A Blackwell runs what was written for an A100, not what was written for sm_90a.
    assert problem_sets.stands_in((10, 0), "A100") and not problem_sets.stands_in((10, 0), "H100")
    assert not problem_sets.stands_in((8, 0), "H100")


def test_the_competition_files_an_h100_can_check(tmp_path):
    problems = _problem_set(tmp_path)
    assert problem_sets.carried_problems(tmp_path) == problems
    chosen = {s.competition.name: s for s in problem_sets.select(problems, (9, 0))}
    assert sorted(chosen) == [
        "amd.yaml",
        "beta.yaml",
        "broken.yaml",
        "linalg.yaml",
        "mixed.yaml",
        "nvidia.yaml",
        "pmpp_v2.yaml",
    ]
    assert chosen["pmpp_v2.yaml"].targets() == [problems / "pmpp_v2.yaml"]
    assert chosen["beta.yaml"].targets() == [problems / "beta.yaml"]
    # A file with problems for other GPUs too: only its own folders are checked.
    assert chosen["mixed.yaml"].targets() == [(problems / "mixed" / "old_py").resolve()]
    assert chosen["mixed.yaml"].left_out == (("new", "for B200"),)
    for other in ("amd.yaml", "nvidia.yaml", "linalg.yaml", "broken.yaml"):
        assert chosen[other].targets() == []
    assert "does not load" in chosen["broken.yaml"].left_out[0][1]
    assert chosen["nvidia.yaml"].left_out == (("nvfp4_gemv", "for NVIDIA"),)


def test_without_carried_problem_sets_the_row_is_skipped(tmp_path):
    assert problem_sets.carried_problems(tmp_path) is None
    ctx = rows_runner.RowContext("problem-sets", a_setting(tmp_path), time.monotonic() + 5)
    said = next(r for r in rows.ROWS if r.name == "problem-sets").run(ctx)
    assert said.status == "skipped" and "no problem sets carried" in said.figures


# The verdicts on what the project's commands print.


def run_json(**fields) -> dict:
    data = {"passed": True, "verdict": "passed", "mode": "test", "message": "ok", "version": 1}
    return {**data, **fields}


def test_a_full_sandbox_with_the_gpus_own_nodes_passes():
    system = {
        "sandbox": "full",
        "user": "uid 1879765888",
        "device_count": 1,
        "gpu_nodes": "all",
        "syscalls": "filtered",
    }
    parsed = judges.run_result(json.dumps(run_json(system=system)))
    assert judges.sandbox(parsed).status == "pass"
    several = {**system, "device_count": 8}
    assert judges.sandbox(RunResult.from_json(run_json(system=several))).status == "fail"
    own = {**several, "gpu_nodes": "own only"}
    assert judges.sandbox(RunResult.from_json(run_json(system=own))).status == "pass"
    partial = {**system, "sandbox": "partial", "sandbox_reason": "bubblewrap is not installed"}
    said = judges.sandbox(RunResult.from_json(run_json(system=partial)))
    assert said.status == "fail" and "bubblewrap is not installed" in said.details


def test_telemetry_needs_nvml_readings_that_make_sense():
    quantities = {
        name: {"min": low * 2, "median": low * 3, "max": low * 4}
        for name, (low, _) in judges.PLAUSIBLE.items()
    }
    phase = {
        "probe": "NVML",
        "device": "NVIDIA H100 80GB HBM3",
        "samples": 120,
        "interval_s": 0.05,
        "quantities": quantities,
        "throttled_share": 0.0,
        "reasons": ["gpu_idle"],
    }
    good = RunResult.from_json(run_json(telemetry={"leaderboard": phase}))
    said = judges.telemetry(good)
    assert said.status == "pass", said.details
    assert "NVML, 120 samples" in said.figures and "throttle: gpu_idle" in said.figures
    hot = {**quantities, "temperature_c": {"min": 400, "median": 500, "max": 600}}
    bad = RunResult.from_json(run_json(telemetry={"leaderboard": {**phase, "quantities": hot}}))
    assert "temperature_c median 500" in judges.telemetry(bad).details
    none = {"probe": "none", "unavailable": "NVML Shared Library Not Found"}
    missing = judges.telemetry(RunResult.from_json(run_json(telemetry={"leaderboard": none})))
    assert missing.status == "fail" and "NVML Shared Library Not Found" in missing.details


def test_a_profile_passes_when_ncus_report_comes_back_whole():
    report = b"NVIDIA Nsight Compute report"
    details = (
        "==PROF== Disconnected\n"
        '"ID","Kernel Name","Section Name","Metric Name","Metric Value"\n'
        '"0","vectorized_elementwise_kernel","SOL","Duration","1.5"\n'
    )
    profiler = {
        "tool": "ncu",
        "report": base64.b64encode(report).decode(),
        "report_bytes": len(report),
        "details": details,
    }
    phase = {
        "name": "profile",
        "exit_code": 0,
        "timed_out": False,
        "duration_s": 9.0,
        "stdout": "",
        "stderr": "",
        "verdict": "passed",
        "message": "",
        "profiler": profiler,
    }
    said, came = judges.profile(RunResult.from_json(run_json(phases=[phase])))
    assert said.status == "pass" and came == report
    assert "1 kernel(s): vectorized_elementwise_kernel" in said.figures
    torch_only = {**phase, "profiler": {"tool": "torch", "note": "ncu not found on PATH"}}
    said, came = judges.profile(RunResult.from_json(run_json(phases=[torch_only])))
    assert said.status == "fail" and "ncu not found on PATH" in said.figures and came == b""


def test_the_ranked_spread_row_holds_scores_within_ten_percent_of_each_other_and_the_benchmark():
    close = judges.spread([0.000200, 0.000205, 0.000210, 0.000198, 0.000202], 0.000201)
    assert close.status == "pass" and "spread 1.061" in close.figures
    wide = judges.spread([0.000200, 0.000230, 0.000201, 0.000202, 0.000203], 0.000201)
    assert wide.status == "fail" and "the spread 1.150 is over 1.1" in wide.details
    taxed = judges.spread([0.000240, 0.000241, 0.000242, 0.000243, 0.000244], 0.000200)
    assert taxed.status == "fail" and "ranked over benchmark 1.210 is over 1.1" in taxed.details


def test_the_timing_row_passes_within_five_percent():
    assert judges.timing(0.000210, 0.000200, "do_bench").status == "pass"
    assert judges.timing(0.000190, 0.000200, "do_bench").status == "pass"
    said = judges.timing(0.000212, 0.000200, "do_bench")
    assert said.status == "fail" and "ratio 1.060" in said.figures


def test_what_leaderboard_check_said_of_each_task():
    found = judges.checked(
        [
            {"name": "a", "loaded": True, "passed": True, "needs": "", "error": "", "ok": True},
            {
                "name": "b",
                "passed": None,
                "needs": "CPU with 2 devices",
                "error": "its largest world_size is 2; H100 here has 1",
                "ok": True,
            },
            {
                "name": "c",
                "passed": False,
                "needs": "",
                "error": "Traceback\n  x\nE: no",
                "ok": False,
            },
        ]
    )
    assert found.passed == ("a",)
    assert found.needs == (
        ("b", "CPU with 2 devices", "its largest world_size is 2; H100 here has 1"),
    )
    assert found.failed == (("c", "E: no"),)


def test_the_hostile_rows_junit_report_is_read_with_what_each_attack_observed():
    xml = (
        '<testsuites><testsuite tests="2" failures="0" errors="0" skipped="1">'
        '<testcase name="test_patched_cuda_events"><properties>'
        '<property name="observed" value="runtime_error: replays show the real time"/>'
        "</properties></testcase>"
        '<testcase name="test_graph"><skipped message="needs a CUDA device"/></testcase>'
        "</testsuite></testsuites>"
    )
    run = judges.junit(xml)
    assert run.counts == {"tests": 2, "failures": 0, "errors": 0, "skipped": 1}
    assert run.cases == (
        ("test_patched_cuda_events", "passed", "runtime_error: replays show the real time"),
        ("test_graph", "skipped", ""),
    )


# What the check carries and sets up.


def test_the_gpu_type_is_this_machines_own_with_its_published_peaks():
    registry = parse_registry(setting.registry_for("H100", H100))
    h100 = registry.get("H100")
    assert (h100.launcher, h100.arch, h100.devices) == ("local", "sm_90a", 1)
    assert h100.peaks is not None and h100.peaks.memory_gbs == 3350
    ampere = setting.registry_for("A100", machine.Facts(nvidia_smi="x", capability=(8, 0)))
    assert parse_registry(ampere).get("A100").arch == "sm_80"


def test_the_commands_see_the_installed_package_not_the_checks_folder(tmp_path):
    own = str(ROOT / "scripts" / "gpu")
    env = setting.command_env({"PYTHONPATH": f"/tmp/site:{own}"}, tmp_path / "gpus.yml")
    assert env["PYTHONPATH"] == "/tmp/site"
    assert env["CLUSTER_MANAGER_GPUS"] == str(tmp_path / "gpus.yml")
    assert "PYTHONPATH" not in setting.command_env({"PYTHONPATH": own}, tmp_path / "g.yml")


def test_what_is_carried_is_pinned_and_never_the_machines_gpu_stack():
    lock = (ROOT / "requirements" / "dev.lock").read_text()
    names = [
        line.split("#")[0].strip()
        for line in (ROOT / "scripts" / "gpu" / "carry.txt").read_text().splitlines()
        if line.split("#")[0].strip()
    ]
    assert names
    for name in names:
        assert re.search(rf"^{re.escape(name)}(\[[^\]]*\])?==\S+", lock, re.M), name
        assert name not in ("torch", "triton", "numpy") and not name.startswith("nvidia-")


def test_the_scripts_and_the_make_targets_are_there():
    assert os.access(CHECK, os.X_OK)
    assert os.access(ROOT / "scripts" / "gpu" / "carry.sh", os.X_OK)
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^gpu-check:\n\tbash scripts/gpu/check$", makefile, re.M)
    assert re.search(r"^gpu-carry: setup\n\tbash scripts/gpu/carry.sh$", makefile, re.M)
    assert ".gpu-carry/" in (ROOT / ".gitignore").read_text().splitlines()
