"""The popcorn protocol: test-case lines, seeds and the result pipe's `key: value` lines."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cluster_manager.core import protocol
from cluster_manager.core.protocol import (
    BENCHMARK_STATS,
    benchmarks_from_result,
    combine_seed,
    encode_report,
    escape_value,
    format_case,
    format_tests_file,
    is_case_value,
    parse_case,
    parse_result_lines,
    parse_tests_file,
)
from cluster_manager.core.run_results import BenchmarkOutcome
from cluster_manager.core.run_results import TestOutcome as CaseOutcome

read_tests = protocol.tests_from_result

keys = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,11}", fullmatch=True)
words = keys.filter(lambda w: w not in {"True", "False"})  # those read back as booleans
scalars = st.one_of(st.integers(), st.booleans(), words)
values = st.one_of(scalars, st.lists(scalars, max_size=5))
cases = st.dictionaries(keys, values, min_size=1, max_size=8)

# Characters str.splitlines() breaks on besides "\n"; see the xfail test below.
_OTHER_LINE_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
messages = st.text(
    alphabet=st.characters(exclude_characters=_OTHER_LINE_BREAKS, exclude_categories=("Cs",))
)


def lines(*items: str) -> str:
    return "".join(item + "\n" for item in items)


def pipe(*pairs: tuple[str, object]) -> dict[str, str]:
    """What a well-behaved harness writes, read back as the runner reads it."""
    return parse_result_lines("".join(f"{k}: {escape_value(v)}\n" for k, v in pairs))


# --- test cases -------------------------------------------------------------------------------


@given(cases)
def test_case_round_trip(case: dict) -> None:
    line = format_case(case)
    assert "\n" not in line
    assert parse_case(line) == case
    assert list(parse_case(line)) == list(case)  # order kept


@given(st.lists(cases, max_size=6))
def test_tests_file_round_trip(all_cases: list[dict]) -> None:
    text = format_tests_file(all_cases)
    assert text.count("\n") == len(all_cases)
    parsed = parse_tests_file(text)
    assert [case for _, case in parsed] == all_cases
    assert [spec for spec, _ in parsed] == [format_case(c) for c in all_cases]


def test_format_case_known_output() -> None:
    assert (
        format_case({"size": 128, "seed": 7, "dtype": "half"}) == "size: 128; seed: 7; dtype: half"
    )
    assert format_case({"offset": -3}) == "offset: -3"


def test_parse_case_whitespace_and_signs() -> None:
    assert parse_case("  size:128 ;seed:   -7;  sign: +5  ; dtype: half ") == {
        "size": 128,
        "seed": -7,
        "sign": 5,
        "dtype": "half",
    }
    assert parse_case("n: 007") == {"n": 7}


def test_parse_tests_file_skips_blank_lines_and_keeps_specs() -> None:
    text = "size: 1; seed: 2\n\n   \nsize: 3\n"
    assert parse_tests_file(text) == [
        ("size: 1; seed: 2", {"size": 1, "seed": 2}),
        ("size: 3", {"size": 3}),
    ]
    assert parse_tests_file("") == []


@pytest.mark.parametrize(
    "line",
    [
        "",
        "size",
        "size 1",
        "size: ",
        "size: 1.5",
        "size: 1e3",
        "size: 16float",
        "size: two words",
        "size: [1, [2]]",
        "size: [1, 2",
        "size: [1.5]",
        "size: (1, 2)",
        "size: 1;",
        ";size: 1",
        "size: 1;; seed: 2",
        "1: 2",
        "si-ze: 1",
        "size: --1",
        "size: 1 2",
        "size:: 1",
        "size: 0x10",
    ],
    ids=repr,
)
@pytest.mark.reliability(
    "Bad input",
    "malformed test-case line (no colon, float, hex, two words, stray `;`, bad key)",
    "refused: ValueError 'invalid test case' quoting the line",
)
def test_parse_case_rejects_malformed_parts(line: str, record_property) -> None:
    with pytest.raises(ValueError, match="invalid test case") as info:
        parse_case(line)
    record_property("observed", str(info.value))


@pytest.mark.reliability(
    "Bad input",
    "test-case line naming a key twice (`size: 1; seed: 2; size: 3`)",
    "refused: \"'size' given twice\"",
)
def test_parse_case_rejects_duplicate_keys(record_property) -> None:
    with pytest.raises(ValueError, match="'size' given twice") as info:
        parse_case("size: 1; seed: 2; size: 3")
    record_property("observed", str(info.value))


def test_parse_tests_file_propagates_errors() -> None:
    with pytest.raises(ValueError, match="invalid test case"):
        parse_tests_file("size: 1\nsize: oops!\n")


@pytest.mark.parametrize("key", ["", "size-x", "2size", "two words", "k:", "k;"], ids=repr)
@pytest.mark.reliability(
    "Bad input",
    "test case with a key that cannot be written (empty, dash, leading digit, space, `:`, `;`)",
    "refused: ValueError naming the case key",
)
def test_format_case_rejects_bad_keys(key: str, record_property) -> None:
    with pytest.raises(ValueError, match="case key") as info:
        format_case({key: 1})
    record_property("observed", str(info.value))


@pytest.mark.parametrize(
    "value",
    [1.5, None, "", "2fast", "two words", "a;b", "True", [1, [2]], [1.5], {"a": 1}],
    ids=repr,
)
@pytest.mark.reliability(
    "Bad input",
    "test case with a value that is not an integer, boolean, word or flat list of those "
    "(float, None, `a;b`, the word 'True', a nested list, a map)",
    "refused: 'must be an integer, a boolean, a word or a list of those'",
)
def test_format_case_rejects_bad_values(value: object, record_property) -> None:
    with pytest.raises(ValueError, match="must be an integer, a boolean, a word") as info:
        format_case({"size": value})  # type: ignore[dict-item]
    record_property("observed", str(info.value))


def test_cases_as_the_public_problem_sets_write_them() -> None:
    case = {"m": [96, 128], "has_bias": True, "nomask": False, "case": "lapack_zero", "k": 7}
    line = format_case(case)
    assert line == "m: [96, 128]; has_bias: True; nomask: False; case: lapack_zero; k: 7"
    parsed = parse_case(line)
    assert parsed == case
    assert parsed["has_bias"] is True and type(parsed["k"]) is int
    assert parse_case("m: []; n: [ 1 ,2 ]") == {"m": [], "n": [1, 2]}


def test_format_tests_file_rejects_bad_case() -> None:
    with pytest.raises(ValueError):
        format_tests_file([{"size": 1}, {"size": 1.5}])


def test_is_case_value() -> None:
    assert is_case_value(0) and is_case_value(-5) and is_case_value(2**80)
    assert is_case_value("half") and is_case_value("bf16") and is_case_value("lapack_zero")
    assert is_case_value(True) and is_case_value([1, True, "x"]) and is_case_value([])
    assert not is_case_value(1.0)
    assert not is_case_value("")
    assert not is_case_value("False")
    assert not is_case_value([[1]])


def test_is_integer_leaves_booleans_out() -> None:
    assert protocol.is_integer(3) and not protocol.is_integer(True)


# --- seeds ------------------------------------------------------------------------------------


def test_combine_seed_is_a_keyed_hash_of_63_bits() -> None:
    assert combine_seed(0, 0) == combine_seed(0, 0)
    assert 0 <= combine_seed(4242, 7) < 2**63
    # Not a pairing: a small secret still gives a seed that shows nothing of it.
    assert combine_seed(1, 2) > 2**40


naturals = st.integers(min_value=0, max_value=2**128)


@given(naturals, naturals)
def test_combine_seed_is_deterministic(case_seed: int, secret: int) -> None:
    assert combine_seed(case_seed, secret) == combine_seed(case_seed, secret)


@given(
    naturals, st.integers(min_value=0, max_value=2**31), st.integers(min_value=0, max_value=2**31)
)
def test_combine_seed_differs_for_different_secrets(case_seed: int, s1: int, s2: int) -> None:
    if s1 != s2:
        assert combine_seed(case_seed, s1) != combine_seed(case_seed, s2)


@given(naturals, naturals, naturals)
def test_combine_seed_differs_for_different_case_seeds(secret: int, c1: int, c2: int) -> None:
    if c1 != c2:
        assert combine_seed(c1, secret) != combine_seed(c2, secret)


def test_combine_seed_differs_on_explicit_pairs() -> None:
    secret = 0x1234_5678
    seeds = {combine_seed(c, secret) for c in range(100)}
    assert len(seeds) == 100
    assert combine_seed(7, secret) != combine_seed(7, secret + 1)


def test_the_secret_cannot_be_read_back_from_a_ranked_seed() -> None:
    """The old pairing gave the secret back to anyone holding a ranked seed and its public
    seed; a keyed hash gives no arithmetic to invert."""
    public, secret = 4242, 1_234_567
    ranked = combine_seed(public, secret)
    w = (math.isqrt(8 * ranked + 1) - 1) // 2  # inverting the Cantor pairing
    assert w - (ranked - w * (w + 1) // 2) != secret
    assert ranked % 2**31 != secret and (ranked ^ public) != secret


# --- result lines -----------------------------------------------------------------------------


def test_parse_result_lines_basic() -> None:
    text = lines("check: pass", "test-count: 2", "test.0.status: pass", "key:no-space", "x: ")
    assert parse_result_lines(text) == {
        "check": "pass",
        "test-count": "2",
        "test.0.status": "pass",
        "key": "no-space",
        "x": "",
    }


def test_parse_result_lines_later_key_wins_and_leading_text_dropped() -> None:
    text = lines("orphan line without key", "check: fail", "check: pass")
    assert parse_result_lines(text) == {"check": "pass"}


def test_parse_result_lines_keeps_spaces_after_the_first() -> None:
    assert parse_result_lines("msg:   indented  \n") == {"msg": "  indented  "}


def test_raw_multiline_continuation_from_third_party_harness() -> None:
    text = lines(
        "test-count: 1",
        "test.0.status: fail",
        "test.0.error: mismatch found",
        "  at index 3",
        "expected 1.0 got 2.0",
        "",
        "check: fail",
    )
    result = parse_result_lines(text)
    assert result["test.0.error"] == "mismatch found\n  at index 3\nexpected 1.0 got 2.0\n"
    assert result["check"] == "fail"
    (outcome,) = read_tests(result)
    assert not outcome.passed
    assert outcome.error.startswith("mismatch found\n  at index 3")


def test_raw_traceback_continuation_keeps_whole_message() -> None:
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "submission.py", line 3, in custom_kernel\n'
        "ValueError: shapes differ"
    )
    result = parse_result_lines(lines("test.0.error: " + traceback, "check: fail"))
    assert result["test.0.error"] == traceback


def test_escape_value_escapes_newlines_and_backslashes() -> None:
    assert escape_value("a\nb") == "a\\nb"
    assert escape_value("back\\slash") == "back\\\\slash"
    assert escape_value("lit\\n") == "lit\\\\n"
    assert escape_value(12.5) == "12.5"
    assert "\n" not in escape_value("x\n\n\ny")


@given(messages, messages)
def test_escaped_error_and_message_round_trip(error: str, message: str) -> None:
    result = pipe(
        ("test-count", 2),
        ("test.0.spec", "size: 1"),
        ("test.0.status", "pass"),
        ("test.0.message", message),
        ("test.1.spec", "size: 2"),
        ("test.1.status", "fail"),
        ("test.1.error", error),
        ("check", "fail"),
    )
    assert result["check"] == "fail"
    first, second = read_tests(result)
    assert first == CaseOutcome(index=0, spec="size: 1", passed=True, error="", message=message)
    assert second.passed is False
    assert second.error == (error or "no result reported for this test")


@pytest.mark.parametrize("brk", ["\r", "\u2028", "\x0c"])
def test_escaped_error_with_other_line_breaks_round_trips(brk: str) -> None:
    error = f"progress 50%{brk}test.0.verdict: memory_limit"
    result = pipe(("test-count", 1), ("test.0.status", "fail"), ("test.0.error", error))
    assert "test.0.verdict" not in result
    assert read_tests(result)[0].error == error


def test_multiline_error_escaped_then_unescaped() -> None:
    error = "line one\nline two: looks like a key\n\\n is literal"
    result = pipe(("test-count", 1), ("test.0.status", "fail"), ("test.0.error", error))
    assert set(result) == {"test-count", "test.0.status", "test.0.error"}
    assert read_tests(result)[0].error == error


@pytest.mark.reliability(
    "Bad input",
    "harness result with a missing test status and a `test-count` of 'many' or -3",
    "a missing status is a failed test; a bad count means no tests, never a crash",
)
def test_tests_from_result_missing_status_and_bad_counts() -> None:
    (outcome,) = read_tests({"test-count": "1", "test.0.spec": "size: 1"})
    assert outcome == CaseOutcome(0, "size: 1", False, "no result reported for this test", "")
    assert read_tests({}) == []
    assert read_tests({"test-count": "many"}) == []
    assert read_tests({"test-count": "-3"}) == []
    statuses = read_tests({"test-count": "2", "test.0.status": "pass"})
    assert [t.passed for t in statuses] == [True, False]
    assert [t.index for t in statuses] == [0, 1]


def bench_pairs(i: int, **stats: object) -> list[tuple[str, object]]:
    return [(f"benchmark.{i}.{k}", v) for k, v in stats.items()]


FULL_STATS = {"runs": 100, "mean": 1500.5, "std": 12.25, "err": 1.5, "best": 1400, "worst": 2e3}


def test_benchmarks_round_trip() -> None:
    result = pipe(
        ("benchmark-count", 2),
        ("benchmark.0.spec", "size: 1"),
        *bench_pairs(0, **FULL_STATS),
        ("benchmark.1.spec", "size: 2"),
        ("benchmark.1.status", "fail"),
        ("benchmark.1.error", "CUDA error:\nillegal memory access"),
        ("check", "fail"),
    )
    ok, failed = benchmarks_from_result(result)
    assert ok == BenchmarkOutcome(
        index=0,
        spec="size: 1",
        passed=True,
        runs=100,
        mean=1500.5,
        std=12.25,
        err=1.5,
        best=1400.0,
        worst=2000.0,
    )
    assert isinstance(ok.runs, int)
    assert failed.passed is False
    assert failed.spec == "size: 2"
    assert failed.error == "CUDA error:\nillegal memory access"
    assert failed.mean == 0.0 and failed.runs == 0


@pytest.mark.reliability(
    "Bad input",
    "benchmark result missing one of its timing stats",
    "benchmark not passed: 'no timings reported for this benchmark'",
)
@pytest.mark.parametrize("missing", BENCHMARK_STATS)
def test_benchmark_with_missing_stat_is_not_passed(missing: str, record_property) -> None:
    stats = {k: v for k, v in FULL_STATS.items() if k != missing}
    result = pipe(("benchmark-count", 1), ("benchmark.0.spec", "s"), *bench_pairs(0, **stats))
    (outcome,) = benchmarks_from_result(result)
    record_property("observed", f"passed={outcome.passed}: {outcome.error}")
    assert not outcome.passed
    assert outcome.error == "no timings reported for this benchmark"


def test_benchmark_with_no_stats_at_all_is_not_passed() -> None:
    (outcome,) = benchmarks_from_result({"benchmark-count": "1"})
    assert not outcome.passed
    assert "no timings reported" in outcome.error


@pytest.mark.reliability(
    "Bad input",
    "benchmark result with a stat that is not a number (`std: fast`)",
    "benchmark not passed, no timing half-read: 'no timings reported'",
)
def test_benchmark_with_unparsable_stat_is_not_passed(record_property) -> None:
    result = pipe(("benchmark-count", 1), *bench_pairs(0, **{**FULL_STATS, "std": "fast"}))
    (outcome,) = benchmarks_from_result(result)
    record_property("observed", f"passed={outcome.passed}, mean={outcome.mean}: {outcome.error}")
    assert not outcome.passed
    assert outcome.mean == 0.0  # nothing half-read
    assert "no timings reported" in outcome.error


def test_benchmark_failed_keeps_its_own_error() -> None:
    result = pipe(
        ("benchmark-count", 1),
        ("benchmark.0.status", "fail"),
        ("benchmark.0.error", "mismatch"),
        *bench_pairs(0, **FULL_STATS),
    )
    (outcome,) = benchmarks_from_result(result)
    assert not outcome.passed
    assert outcome.error == "mismatch"


def test_cases_after_a_failed_one_are_not_run_not_untimed() -> None:
    result = pipe(
        ("benchmark-count", 3),
        ("benchmark.0.spec", "size: 1"),
        ("benchmark.0.status", "fail"),
        ("benchmark.0.error", "mismatch"),
        ("benchmark.2.spec", "size: 3"),  # reached, then nothing: not a skipped case
    )
    first, second, third = benchmarks_from_result(result, specs=["size: 1", "size: 2", "size: 3"])
    assert (first.skipped, first.error) == (False, "mismatch")
    assert second.skipped and not second.passed
    assert (second.spec, second.error) == ("size: 2", "not run: an earlier case failed")
    assert not third.skipped and third.error == "no timings reported for this benchmark"


def test_a_case_without_timings_before_any_failure_is_not_skipped() -> None:
    (outcome,) = benchmarks_from_result({"benchmark-count": "1"}, specs=["size: 1"])
    assert not outcome.skipped and outcome.error == "no timings reported for this benchmark"


def test_benchmark_passed_is_a_bool_when_timings_are_missing() -> None:
    (outcome,) = benchmarks_from_result({"benchmark-count": "1", "benchmark.0.mean": "5"})
    assert outcome.passed is False


@pytest.mark.reliability(
    "Bad input",
    "benchmark result with `runs: nan` or `runs: inf`",
    "benchmark not passed; no crash converting to int",
)
@pytest.mark.parametrize("runs", ["nan", "inf"])
def test_benchmark_with_non_finite_runs_does_not_crash(runs: str, record_property) -> None:
    result = pipe(("benchmark-count", 1), *bench_pairs(0, **{**FULL_STATS, "runs": runs}))
    (outcome,) = benchmarks_from_result(result)
    record_property("observed", f"passed={outcome.passed}: {outcome.error}")
    assert not outcome.passed


def test_profile_report_is_decoded() -> None:
    report = "kernel  time\nadd     1.2 us ✓\n" * 20
    encoded = encode_report(report)
    assert "\n" not in encoded
    assert "/" not in encoded  # altchars: '*' replaces '/'
    result = pipe(
        ("benchmark-count", 1), ("benchmark.0.spec", "s"), ("benchmark.0.report", encoded)
    )
    (outcome,) = benchmarks_from_result(result)
    assert outcome.report == report
    assert outcome.passed is True  # a report counts as a result in profile mode
    assert outcome.error == ""


@given(st.text())
def test_encode_report_round_trip(text: str) -> None:
    encoded = encode_report(text)
    result = {"benchmark-count": "1", "benchmark.0.report": encoded}
    assert benchmarks_from_result(result)[0].report == text


@pytest.mark.reliability(
    "Bad input",
    "profile report that is not base64",
    "kept as raw text, no decode error",
)
def test_report_that_is_not_base64_is_kept_raw() -> None:
    (outcome,) = benchmarks_from_result(
        {"benchmark-count": "1", "benchmark.0.report": "plain text, not base64!"}
    )
    assert outcome.report == "plain text, not base64!"


def test_failed_profile_with_report_is_not_passed() -> None:
    result = {
        "benchmark-count": "1",
        "benchmark.0.status": "fail",
        "benchmark.0.report": encode_report("partial"),
    }
    (outcome,) = benchmarks_from_result(result)
    assert not outcome.passed
    assert outcome.report == "partial"


@pytest.mark.reliability(
    "Bad input",
    "random text on the result pipe (property-based, hypothesis)",
    "parse_result_lines never raises; it returns a dict of strings",
)
@given(st.text())
def test_parse_result_lines_never_raises(text: str) -> None:
    result = parse_result_lines(text)
    assert isinstance(result, dict)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in result.items())


# No digits in free text: a huge `test-count` would make the outcome lists huge.
_NO_DIGITS = st.text(st.characters(exclude_categories=("Nd", "Cs")), max_size=20)
_KEYISH = st.sampled_from(
    ["check", "test-count", "benchmark-count", "test.0.status", "test.0.error", "benchmark.0.mean"]
)


@pytest.mark.reliability(
    "Bad input",
    "random values for check/test/benchmark result keys (property-based, hypothesis)",
    "test and benchmark outcomes are always built; nothing raises",
)
@given(
    st.lists(
        st.tuples(_KEYISH, st.one_of(st.integers(-3, 3).map(str), _NO_DIGITS)),
        max_size=12,
    )
)
def test_outcomes_from_arbitrary_small_results_never_raise(pairs: list) -> None:
    result = parse_result_lines("".join(f"{k}: {v}\n" for k, v in pairs))
    tests = read_tests(result)
    benches = benchmarks_from_result(result)
    assert all(isinstance(t, CaseOutcome) for t in tests)
    assert all(isinstance(b, BenchmarkOutcome) for b in benches)


def test_protocol_constants() -> None:
    assert protocol.ENV_FD == "POPCORN_FD"
    assert protocol.ENV_SEED == "POPCORN_SEED"
    assert (protocol.EXIT_PIPE_FAIL, protocol.EXIT_TEST_FAIL, protocol.EXIT_TEST_SPEC) == (
        111,
        112,
        113,
    )


# The grammar the newer public `eval.py` files accept for one `key: value` part.
PUBLIC_PART = re.compile(r"\s*([a-zA-Z_]\w*)\s*:\s*(\[[^\]]*\]|[a-zA-Z_]\w*|[+-]?[0-9]+)\s*")


@given(cases)
def test_a_public_eval_reads_every_case_we_write(case: dict) -> None:
    parts = format_case(case).split(";")
    assert all(PUBLIC_PART.fullmatch(part) for part in parts), parts
