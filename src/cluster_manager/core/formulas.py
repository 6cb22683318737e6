"""Arithmetic over a case's values, as a task writes it in task.yml (`3 * size * size * 2`).

Never `eval`: the text is parsed with `ast` and walked here, allowing only numbers, the case's
names, `+ - * / // % **`, unary `+`/`-`, parentheses and `min(...)`/`max(...)`. Everything is
computed in floats, so `10 ** 10 ** 10` overflows at once instead of building a huge integer,
and every failure (an unknown name, a word where a number belongs, a division by zero) is a
`FormulaError` that says which.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from typing import TypeGuard

MAX_FORMULA_CHARS = 400

_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_CALLS: dict[str, Callable[..., float]] = {"min": min, "max": max}


class FormulaError(ValueError):
    """A formula that cannot be read, or cannot be computed for a case."""


def parse(text: object) -> ast.expr:
    """The formula's tree, once its shape is allowed (names are checked per case)."""
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise FormulaError(f"must be a formula (text or a number), got {text!r}")
    source = str(text)
    if len(source) > MAX_FORMULA_CHARS:
        raise FormulaError(f"longer than {MAX_FORMULA_CHARS} characters")
    try:
        tree = ast.parse(source.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise FormulaError(f"{source!r} is not a formula ({type(exc).__name__})") from None
    _check_shape(tree)
    return tree


def _check_shape(node: ast.AST) -> None:
    allowed = (ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Call)
    for child in ast.walk(node):
        if isinstance(child, ast.expr) and not isinstance(child, allowed):
            raise FormulaError(f"{type(child).__name__} is not allowed (only arithmetic)")
        if isinstance(child, ast.BinOp) and type(child.op) not in _BINARY:
            raise FormulaError(f"operator {type(child.op).__name__} is not allowed")
        if isinstance(child, ast.UnaryOp) and type(child.op) not in _UNARY:
            raise FormulaError(f"operator {type(child.op).__name__} is not allowed")
        if isinstance(child, ast.Constant) and not _is_number(child.value):
            raise FormulaError(f"{child.value!r} is not a number")
        if isinstance(child, ast.Call) and not (
            isinstance(child.func, ast.Name)
            and child.func.id in _CALLS
            and child.args
            and not child.keywords
        ):
            raise FormulaError("the only calls allowed are min(a, b, ...) and max(a, b, ...)")


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def names(tree: ast.expr) -> set[str]:
    """The case values a formula reads (min and max are not names of the case)."""
    called = {id(c.func) for c in ast.walk(tree) if isinstance(c, ast.Call)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in called}


def evaluate(tree: ast.expr, values: Mapping[str, object]) -> float:
    """The formula's value for a case: finite, or a FormulaError naming what went wrong."""
    try:
        result = _value(tree, values)
    except (ZeroDivisionError, OverflowError) as exc:
        raise FormulaError(f"cannot be computed ({exc})") from None
    except (RecursionError, MemoryError):
        raise FormulaError("nested too deeply") from None
    if not math.isfinite(result):
        raise FormulaError(f"is not a finite number ({result})")
    return result


def _value(node: ast.expr, values: Mapping[str, object]) -> float:
    match node:
        case ast.Constant(value=value) if _is_number(value):
            return float(value)
        case ast.Name(id=name):
            if name not in values:
                known = ", ".join(sorted(values)) or "none"
                raise FormulaError(f"unknown name {name!r} (the case's names: {known})")
            found = values[name]
            if not _is_number(found):
                raise FormulaError(f"{name!r} is {found!r}, not a number")
            return float(found)
        case ast.BinOp(left=left, op=op, right=right):
            result = _BINARY[type(op)](_value(left, values), _value(right, values))
            if isinstance(result, complex):  # (-8) ** (1 / 3)
                raise FormulaError("is not a real number")
            return result
        case ast.UnaryOp(op=op, operand=operand):
            return _UNARY[type(op)](_value(operand, values))
        case ast.Call(func=ast.Name(id=name), args=args):
            return float(_CALLS[name](*(_value(a, values) for a in args)))
    raise FormulaError(f"{ast.dump(node)[:60]} is not allowed")  # not reached after parse()
