"""The speed of light through the CLI: `eval`'s report shows each case's achieved bandwidth
and share of peak, and `leaderboard check` refuses a task whose formulas cannot be computed,
naming the file and the key."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from cluster_manager.harness.machine_peaks import CACHE_ENV
from tests.conftest import EXAMPLES, write_task
from tests.support.cli import NOT_INHERITED, environment, run_cli


def cli(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = environment({CACHE_ENV: str(cache)}, unset=(*NOT_INHERITED, "CLUSTER_MANAGER_GPUS"))
    return run_cli(*args, env=env, timeout=600)


def test_eval_reports_each_cases_bandwidth_and_share_of_peak(tmp_path: Path):
    task = EXAMPLES / "identity_py"
    done = cli(
        "eval", str(task), str(task / "submission.py"), "--mode", "benchmark", cache=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    start = lines.index("Speed of light (benchmark phase)")
    header, first, second, peaks = lines[start + 1 : start + 5]
    assert header.split() == ["case", "bandwidth", "FLOP", "rate", "of", "peak"]
    for row, size in ((first, 4096), (second, 65536)):
        assert row.startswith(f"  size: {size}; seed: "), row
        assert "B/s" in row and row.rstrip().endswith("% memory"), row
    assert peaks.startswith("  peaks (this machine's, measured: not a ceiling): "), peaks
    assert "B/s, " not in peaks  # identity states bytes only: no FLOP peak to show
    assert list(tmp_path.iterdir()), "the machine's peaks were not cached"


def test_check_refuses_formulas_a_case_cannot_compute(tmp_path: Path):
    folder = write_task(
        tmp_path / "bad_formula",
        benchmarks=[{"size": 256, "seed": 3}],
        extra={"speed_of_light": {"bytes": "2 * n * 4"}},
    )
    done = cli("leaderboard", "check", str(folder), cache=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        "invalid task: task.yml: speed_of_light.bytes (benchmarks[0]): unknown name 'n' "
        "(the case's names: seed, size)"
    ) in done.stdout


def test_eval_measures_against_a_named_gpu_types_published_peaks(tmp_path: Path):
    task = EXAMPLES / "vectoradd_py"
    args = ("eval", str(task), str(task / "submission.py"), "--mode", "benchmark")
    done = cli(*args, "--gpu", "h100", "--json", cache=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    speeds = [b["speed"] for p in json.loads(done.stdout)["phases"] for b in p["benchmarks"]]
    assert len(speeds) == 3
    for speed in speeds:
        assert speed["peak_gbs"] == 3350 and speed["peak_tflops"] == 989.4
        assert speed["measured_peaks"] is False and speed["precision"] == "fp16"
    assert not list(tmp_path.iterdir())  # nothing measured here
    unknown = cli(*args, "--gpu", "H1000", cache=tmp_path)
    assert unknown.returncode == 2, unknown.stderr
    assert "unknown GPU type 'H1000'; did you mean H100" in unknown.stderr
