"""The formulas of a task's `speed_of_light`: arithmetic over a case's values, never eval."""

from __future__ import annotations

import pytest

from cluster_manager.core.formulas import FormulaError, evaluate, names, parse

CASE = {"size": 1024, "rows": 7, "cols": 33, "seed": 4242, "dtype": "fp16", "causal": True}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("3 * size * size * 2", 3 * 1024 * 1024 * 2),
        ("2 * rows * cols * 4", 2 * 7 * 33 * 4),
        ("(rows + 1) * (cols - 1)", 8 * 32),
        ("size / 4", 256.0),
        ("size // 3", 341.0),
        ("size % 1000", 24.0),
        ("2 ** 10", 1024.0),
        ("-rows + 10", 3.0),
        ("+rows", 7.0),
        ("min(rows, cols) * max(rows, cols, 40)", 7 * 40),
        ("1.5e3", 1500.0),
        (4096, 4096.0),  # YAML gives a bare number
    ],
)
def test_arithmetic_over_the_case(text: object, value: float):
    assert evaluate(parse(text), CASE) == value


def test_nesting_is_bounded_by_the_length():
    assert evaluate(parse("-" * 399 + "1"), CASE) == -1.0


def test_names_are_the_case_values_a_formula_reads():
    assert names(parse("min(rows, cols) * size")) == {"rows", "cols", "size"}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("__import__('os').system('true')", "calls allowed are min"),
        ("size.bit_length", "Attribute is not allowed"),
        ("size.bit_length()", "calls allowed are min"),
        ("open('/etc/passwd')", "calls allowed are min"),
        ("min()", "calls allowed are min"),
        ("max(rows, key=abs)", "calls allowed are min"),
        ("lambda: 1", "Lambda is not allowed"),
        ("[size][0]", "is not allowed"),
        ("size if rows else cols", "IfExp is not allowed"),
        ("size > 3", "Compare is not allowed"),
        ("size << 2", "LShift is not allowed"),
        ("not size", "Not is not allowed"),
        ("'abc'", "'abc' is not a number"),
        ("True", "True is not a number"),
        ("size; 1", "not a formula"),
        ("3 *", "not a formula"),
        ("x" * 500, "longer than"),
        ("(" * 300 + "1" + ")" * 300, "longer than"),
        (True, "must be a formula"),
        (["size"], "must be a formula"),
    ],
)
def test_anything_but_arithmetic_is_refused(text: object, reason: str):
    with pytest.raises(FormulaError, match=reason.replace("(", r"\(").replace("[", r"\[")):
        parse(text)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("n * 2", "unknown name 'n' (the case's names: causal, cols, dtype, rows, seed, size)"),
        ("dtype * 2", "'dtype' is 'fp16', not a number"),
        ("causal * 2", "'causal' is True, not a number"),
        ("size / (rows - 7)", "cannot be computed"),
        ("size % 0", "cannot be computed"),
        ("10 ** 10 ** 10", "cannot be computed"),
        ("(-8) ** (1 / 3)", "not a real number"),
    ],
)
def test_what_cannot_be_computed_for_a_case_says_why(text: str, reason: str):
    with pytest.raises(FormulaError) as caught:
        evaluate(parse(text), CASE)
    assert reason in str(caught.value)
