"""judge_phase: from a phase's exit status, timeout and result pipe to a verdict."""

from __future__ import annotations

import signal

import pytest

from cluster_manager.core.models import Verdict
from cluster_manager.core.verdicts import PhaseJudgement, judge_phase


def passing_tests(n: int) -> dict[str, str]:
    result = {"test-count": str(n), "check": "pass"}
    for i in range(n):
        result[f"test.{i}.spec"] = f"size: {i}"
        result[f"test.{i}.status"] = "pass"
    return result


def passing_benchmarks(n: int) -> dict[str, str]:
    result = {"benchmark-count": str(n), "check": "pass"}
    for i in range(n):
        result[f"benchmark.{i}.spec"] = f"size: {i}"
        for stat, value in [
            ("runs", "10"),
            ("mean", "1000"),
            ("std", "1"),
            ("err", "0.5"),
            ("best", "990"),
            ("worst", "1010"),
        ]:
            result[f"benchmark.{i}.{stat}"] = value
    return result


def judge(
    phase: str = "test",
    *,
    case_count: int = 2,
    exit_code: int | None = 0,
    timed_out: bool = False,
    timeout_s: float = 60.0,
    result: dict[str, str] | None = None,
    specs: tuple[str, ...] | list[str] = (),
) -> PhaseJudgement:
    return judge_phase(
        phase,  # type: ignore[arg-type]  # the popcorn mode strings, as the runner passes them
        case_count=case_count,
        exit_code=exit_code,
        timed_out=timed_out,
        timeout_s=timeout_s,
        result={} if result is None else result,
        specs=specs,
    )


def failing_test_result(**extra: str) -> dict[str, str]:
    result = passing_tests(2)
    result.update(
        {
            "check": "fail",
            "test.1.status": "fail",
            "test.1.error": "mismatch at index 3\\nsecond line",
            **extra,
        }
    )
    return result


def test_timeout_wins_over_everything() -> None:
    j = judge(timed_out=True, exit_code=-9, timeout_s=12.5, result=passing_tests(2))
    assert j.verdict is Verdict.TIMEOUT
    assert j.message == "test: exceeded the time limit of 12.5 s"
    assert len(j.tests) == 2  # what was reported is still kept


def test_timeout_with_no_exit_code() -> None:
    j = judge("leaderboard", timed_out=True, exit_code=None, timeout_s=180)
    assert j.verdict is Verdict.TIMEOUT
    assert "leaderboard" in j.message and "180 s" in j.message


def test_check_fail_is_wrong_answer_with_first_failure() -> None:
    j = judge(exit_code=112, result=failing_test_result())
    assert j.verdict is Verdict.WRONG_ANSWER
    assert j.message == "test: test 1 failed: mismatch at index 3"
    assert [t.passed for t in j.tests] == [True, False]
    assert j.tests[1].error == "mismatch at index 3\nsecond line"


@pytest.mark.parametrize(
    ("kind", "verdict"),
    [
        ("runtime_error", Verdict.RUNTIME_ERROR),
        ("memory_limit", Verdict.MEMORY_LIMIT),
        ("timeout", Verdict.TIMEOUT),
    ],
)
def test_check_fail_with_reported_verdict(kind: str, verdict: Verdict) -> None:
    j = judge(exit_code=112, result=failing_test_result(**{"test.1.verdict": kind}))
    assert j.verdict is verdict
    assert j.message.startswith("test: test 1 failed: ")


def test_memory_limit_beats_runtime_error_among_failures() -> None:
    result = failing_test_result(**{"test.1.verdict": "runtime_error"})
    result.update(
        {"test.0.status": "fail", "test.0.error": "oom", "test.0.verdict": "memory_limit"}
    )
    j = judge(exit_code=112, result=result)
    assert j.verdict is Verdict.MEMORY_LIMIT
    assert j.message == "test: test 0 failed: oom"


def test_unknown_reported_verdict_is_wrong_answer() -> None:
    j = judge(exit_code=112, result=failing_test_result(**{"test.1.verdict": "passed"}))
    assert j.verdict is Verdict.WRONG_ANSWER


def test_verdict_of_a_passing_test_is_ignored() -> None:
    j = judge(exit_code=112, result=failing_test_result(**{"test.0.verdict": "memory_limit"}))
    assert j.verdict is Verdict.WRONG_ANSWER


def test_check_fail_without_listed_failures() -> None:
    result = passing_tests(2) | {"check": "fail"}
    j = judge(exit_code=112, result=result)
    assert j.verdict is Verdict.WRONG_ANSWER
    assert j.message == "test: the harness reported a failure"


def test_check_fail_names_the_harness_own_reason() -> None:
    # A main that refuses to start (no GPU, say) logs `error:` and no case.
    result = {"check": "fail", "error": "No CUDA GPU available. This script requires a GPU."}
    j = judge(exit_code=1, result=result)
    assert j.message == (
        "test: the harness reported a failure: No CUDA GPU available. This script requires a GPU."
    )


def test_cases_never_reached_keep_their_specs() -> None:
    result = {"test-count": "2", "test.0.spec": "size: 0", "test.0.status": "pass"}
    j = judge(exit_code=1, result=result, specs=["size: 0", "size: 1"])
    assert [t.spec for t in j.tests] == ["size: 0", "size: 1"]
    assert j.tests[1].error == "no result reported for this test"


def test_check_fail_on_benchmark() -> None:
    result = passing_benchmarks(2)
    result.update(
        {
            "check": "fail",
            "benchmark.1.status": "fail",
            "benchmark.1.error": "CUDA error: an illegal memory access",
            "benchmark.1.verdict": "runtime_error",
        }
    )
    j = judge("leaderboard", exit_code=112, result=result)
    assert j.verdict is Verdict.RUNTIME_ERROR
    assert j.message == "leaderboard: benchmark 1 failed: CUDA error: an illegal memory access"
    assert [b.passed for b in j.benchmarks] == [True, False]


def test_long_error_first_line_is_truncated() -> None:
    j = judge(exit_code=112, result=failing_test_result(**{"test.1.error": "\n\n" + "x" * 1000}))
    detail = j.message.removeprefix("test: test 1 failed: ")
    assert len(detail) == 300
    assert detail.endswith("…")


def test_a_traceback_is_summed_up_by_its_exception_line() -> None:
    trace = (
        "Traceback (most recent call last):\\n"
        '  File \\"submission.py\\", line 3, in custom_kernel\\n'
        "OSError: [Errno 24] Too many open files\\n"
    )
    j = judge(exit_code=112, result=failing_test_result(**{"test.1.error": trace}))
    assert j.message == "test: test 1 failed: OSError: [Errno 24] Too many open files"


def test_killed_by_sigkill_without_check_is_memory_limit() -> None:
    j = judge(exit_code=-signal.SIGKILL)
    assert j.verdict is Verdict.MEMORY_LIMIT
    assert j.message == "test: killed by SIGKILL (out of memory?)"


def test_exit_code_minus_9_is_memory_limit() -> None:
    assert judge(exit_code=-9, result=passing_tests(1)).verdict is Verdict.MEMORY_LIMIT


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGTERM])
def test_other_signals_are_runtime_error(sig: signal.Signals) -> None:
    j = judge(exit_code=-sig)
    assert j.verdict is Verdict.RUNTIME_ERROR
    assert j.message == f"test: killed by {sig.name}"


def test_unknown_signal_number() -> None:
    j = judge(exit_code=-200)
    assert j.verdict is Verdict.RUNTIME_ERROR
    assert j.message == "test: killed by signal 200"


@pytest.mark.parametrize("code", [1, 2, 111, 113, 255])
def test_nonzero_exit_without_check_is_runtime_error(code: int) -> None:
    j = judge(exit_code=code, result={"test-count": "2"})
    assert j.verdict is Verdict.RUNTIME_ERROR
    assert j.message == f"test: the harness exited with code {code}"


def test_nonzero_exit_with_check_pass_is_runtime_error() -> None:
    j = judge(exit_code=1, result=passing_tests(2))
    assert j.verdict is Verdict.RUNTIME_ERROR


def test_exit_none_without_timeout_is_runtime_error() -> None:
    assert judge(exit_code=None).verdict is Verdict.RUNTIME_ERROR


@pytest.mark.parametrize("check", [None, "maybe", "PASS"])
def test_exit_zero_without_check_pass_is_runtime_error(check: str | None) -> None:
    result = passing_tests(2)
    if check is None:
        del result["check"]
    else:
        result["check"] = check
    j = judge(exit_code=0, result=result)
    assert j.verdict is Verdict.RUNTIME_ERROR
    assert j.message == "test: the harness ended without a result"


def test_check_pass_with_fewer_tests_than_cases() -> None:
    j = judge(case_count=3, result=passing_tests(2))
    assert j.verdict is Verdict.RUNTIME_ERROR
    assert j.message == "test: 2 of 3 test results reported"


def test_check_pass_with_more_tests_than_cases() -> None:
    j = judge(case_count=1, result=passing_tests(2))
    assert j.verdict is Verdict.RUNTIME_ERROR


def test_check_pass_with_a_failed_test_is_not_passed() -> None:
    result = passing_tests(2)
    result["test.1.status"] = "fail"
    assert judge(result=result).verdict is Verdict.RUNTIME_ERROR


def test_check_pass_complete_tests_pass() -> None:
    j = judge(case_count=3, result=passing_tests(3))
    assert j.verdict is Verdict.PASSED
    assert j.message == "test: all 3 tests passed"
    assert len(j.tests) == 3 and all(t.passed for t in j.tests)
    assert j.benchmarks == ()


@pytest.mark.parametrize("phase", ["benchmark", "leaderboard"])
def test_check_pass_complete_benchmarks_pass(phase: str) -> None:
    j = judge(phase, case_count=2, result=passing_benchmarks(2))
    assert j.verdict is Verdict.PASSED
    assert j.message == f"{phase}: all 2 benchmarks passed"
    assert [b.mean for b in j.benchmarks] == [1000.0, 1000.0]


@pytest.mark.parametrize("phase", ["benchmark", "leaderboard"])
def test_check_pass_with_fewer_benchmarks_than_cases(phase: str) -> None:
    j = judge(phase, case_count=3, result=passing_benchmarks(2))
    assert j.verdict is Verdict.RUNTIME_ERROR
    assert j.message == f"{phase}: 2 of 3 benchmark results reported"


def test_check_pass_with_benchmark_missing_timings() -> None:
    result = passing_benchmarks(2)
    del result["benchmark.1.mean"]
    j = judge("benchmark", result=result)
    assert j.verdict is Verdict.RUNTIME_ERROR
    assert "benchmark 1 has no passing result" in j.message


def test_test_results_do_not_count_for_benchmark_phase() -> None:
    j = judge("benchmark", case_count=2, result=passing_tests(2))
    assert j.verdict is Verdict.RUNTIME_ERROR
    assert j.message == "benchmark: 0 of 2 benchmark results reported"


def test_profile_phase_with_reports_passes() -> None:
    from cluster_manager.core.protocol import encode_report

    result = {
        "benchmark-count": "1",
        "benchmark.0.report": encode_report("profile table"),
        "check": "pass",
    }
    j = judge("profile", case_count=1, result=result)
    assert j.verdict is Verdict.PASSED
    assert j.benchmarks[0].report == "profile table"


def test_a_ranked_phase_names_the_failed_case_not_the_ones_it_never_ran() -> None:
    judgement = judge(
        "leaderboard",
        result={
            "check": "fail",
            "benchmark-count": "2",
            "benchmark.0.spec": "size: 1",
            "benchmark.0.status": "fail",
            "benchmark.0.error": "mismatch",
        },
        specs=["size: 1", "size: 2"],
    )
    assert judgement.verdict is Verdict.WRONG_ANSWER
    assert judgement.message == "leaderboard: benchmark 0 failed: mismatch"
    assert [b.skipped for b in judgement.benchmarks] == [False, True]
