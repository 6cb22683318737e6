"""The plugin behind docs/RELIABILITY.md: one row per marked test, with what really happened."""

from __future__ import annotations

import pytest

MARKED_TESTS = """
import pytest

@pytest.mark.reliability("Bad input", "an empty file", "refused: empty")
def test_refused(record_property):
    record_property("observed", "refused: the file is empty")

@pytest.mark.reliability("Faults", "a crash", "recovers")
def test_broken(record_property):
    record_property("observed", "it tried")
    assert 1 == 2

@pytest.mark.reliability("Anti-cheat", "a trick", "wrong_answer")
@pytest.mark.xfail(strict=True, reason="known gap: the trick works")
def test_gap():
    assert False

@pytest.mark.reliability("Sandbox", "each of {case}", "stopped")
@pytest.mark.parametrize("case", ["a", "b"])
def test_cases(case):
    pass

def test_unmarked():
    pass
"""


@pytest.fixture
def pytester(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    return pytester


def test_each_marked_test_becomes_a_row_with_its_real_outcome(pytester: pytest.Pytester):
    pytester.makepyfile(test_marked=MARKED_TESTS)
    report = pytester.path / "RELIABILITY.md"
    result = pytester.runpytest(
        "-p", "tests.support.reliability", "--reliability-report", str(report)
    )
    result.assert_outcomes(passed=4, failed=1, xfailed=1)
    page = report.read_text()
    assert "5 rows, 3 as expected, 1 known gap, 1 FAILED" in page
    assert "| an empty file | refused: empty | refused: the file is empty | as expected |" in page
    # A failure shows what went wrong, not only what the test had recorded before it.
    assert "| a crash | recovers | call failed: assert 1 == 2 (it saw: it tried) | FAILED |" in page
    assert "| known gap: the trick works | known gap |" in page
    assert "each of {case} [a]" in page and "each of {case} [b]" in page
    assert "test_unmarked" not in page
    # Sections follow the fixed order of categories.
    order = [page.index(f"## {c}") for c in ("Sandbox", "Anti-cheat", "Bad input", "Faults")]
    assert order == sorted(order)


def test_an_unknown_category_is_a_usage_error(pytester: pytest.Pytester):
    pytester.makepyfile(
        test_bad="""
import pytest

@pytest.mark.reliability("Speed", "x", "y")
def test_x():
    pass
"""
    )
    result = pytester.runpytest("-p", "tests.support.reliability")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown reliability category 'Speed'*"])
