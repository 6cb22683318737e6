"""The popcorn runner protocol, spoken exactly as the public problem sets' `eval.py` speaks it.

- The task's main is started as `MAIN MODE TESTS_FILE` with `POPCORN_FD` naming a pipe.
- TESTS_FILE holds one case per line: `k: v; k: v`, each value in Python's rendering: an
  integer, `True`/`False`, a word, or a list of those (`[96, 128]`).
- The main writes `key: value` lines to the pipe (`check: pass`, `test-count: 3`,
  `test.0.status: pass`, `benchmark.0.mean: 1234.5`, ...).
- In ranked mode `POPCORN_SEED` carries the secret seed, mixed into each case's seed.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TypeGuard

from cluster_manager.core.models import Case, CaseScalar, CaseValue
from cluster_manager.core.run_results import BenchmarkOutcome, TestOutcome

ENV_FD = "POPCORN_FD"
ENV_SEED = "POPCORN_SEED"
ENV_GPUS = "POPCORN_GPUS"
# Not popcorn: how long the built-in harness may spend timing benchmarks; the runner sets it.
ENV_TIME_BUDGET = "CLUSTER_MANAGER_TIME_BUDGET"
# Not popcorn: the longest the built-in harness times one benchmark case, where a request
# asks for less than its own cap (`leaderboard check`).
ENV_CASE_BUDGET = "CLUSTER_MANAGER_CASE_BUDGET"
# The vendors' variables that pin a process to GPUs (NVIDIA's, then AMD's two).
VISIBLE_DEVICE_ENVS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")

# Public C++ harnesses read POPCORN_SEED with stoi: secret seeds stay below 2**31.
SECRET_SEED_BITS = 31

# Exit codes the public harnesses use.
EXIT_TEST_FAIL = 112
EXIT_PIPE_FAIL = 111
EXIT_TEST_SPEC = 113

# Keys and words as the newer public `eval.py` files read them (`[a-zA-Z_]\w*`).
CASE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
CASE_WORD = CASE_KEY
_BOOLEANS = {"True": True, "False": False}
_CASE_PART = re.compile(
    r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(\[[^\]]*\]|[A-Za-z_][A-Za-z0-9_]*|[+-]?[0-9]+)\s*"
)
# Keys are lower case (`check`, `test.0.status`); `ValueError: ...` in a raw traceback is not one.
_RESULT_LINE = re.compile(r"([a-z][a-z0-9_.\-]*):\s?(.*)")

BENCHMARK_STATS = ("runs", "mean", "std", "err", "best", "worst")


def is_integer(value: object) -> TypeGuard[int]:
    """An integer that is not a boolean (`True` is an int in Python)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _is_scalar(value: object) -> bool:
    if isinstance(value, bool | int):
        return True
    # `True` as a word would read back as the boolean: it cannot be a word.
    return isinstance(value, str) and bool(CASE_WORD.fullmatch(value)) and value not in _BOOLEANS


def is_case_value(value: object) -> bool:
    """An integer, a boolean, a word, or a flat list of those."""
    if isinstance(value, list | tuple):
        return all(_is_scalar(item) for item in value)
    return _is_scalar(value)


def _render(value: CaseValue) -> str:
    """Python's rendering, without quotes on words: what the public parsers read."""
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_render(item) for item in value) + "]"
    return str(value)


def format_case(case: Mapping[str, CaseValue]) -> str:
    """`{"size": 128, "bias": True, "m": [96, 128]}` -> `size: 128; bias: True; m: [96, 128]`."""
    for key, value in case.items():
        if not CASE_KEY.fullmatch(key):
            raise ValueError(f"case key {key!r} must be a name: letters, digits and '_'")
        if not is_case_value(value):
            raise ValueError(
                f"case value {key}={value!r} must be an integer, a boolean, a word "
                "or a list of those"
            )
    return "; ".join(f"{k}: {_render(v)}" for k, v in case.items())


def _scalar(raw: str) -> CaseScalar:
    if raw.lstrip("+-").isdigit():
        return int(raw)
    if raw in _BOOLEANS:
        return _BOOLEANS[raw]
    if CASE_WORD.fullmatch(raw):
        return raw
    raise ValueError(f"cannot read {raw!r}")


def _value(raw: str) -> CaseValue:
    if not raw.startswith("["):
        return _scalar(raw)
    inner = raw[1:-1].strip()
    return [_scalar(item.strip()) for item in inner.split(",")] if inner else []


def parse_case(line: str) -> Case:
    case: Case = {}
    for part in line.split(";"):
        match = _CASE_PART.fullmatch(part)
        if match is None:
            raise ValueError(f"invalid test case {line!r}: cannot read {part!r}")
        key, raw = match[1], match[2]
        if key in case:
            raise ValueError(f"invalid test case {line!r}: {key!r} given twice")
        try:
            case[key] = _value(raw)
        except ValueError as exc:
            raise ValueError(f"invalid test case {line!r}: {key}: {exc}") from None
    return case


def format_tests_file(cases: Iterable[Mapping[str, CaseValue]]) -> str:
    return "".join(format_case(c) + "\n" for c in cases)


def parse_tests_file(text: str) -> list[tuple[str, Case]]:
    """Returns (spec, case) per non-empty line; the spec is the line as written."""
    return [(line, parse_case(line)) for line in text.splitlines() if line.strip()]


def parse_seed(raw: str) -> int:
    """A secret seed as typed (`eval --seed`); ValueError saying what a seed is."""
    largest = 2**SECRET_SEED_BITS - 1
    try:
        seed = int(raw.strip())
    except ValueError:
        seed = -1
    if not 0 <= seed <= largest:
        raise ValueError(f"{raw!r} is not a seed: give a whole number from 0 to {largest}")
    return seed


def new_secret_seed() -> int:
    import secrets  # here: it loads OpenSSL, which only ranked runs need

    return secrets.randbits(SECRET_SEED_BITS)


def combine_seed(case_seed: int, secret_seed: int) -> int:
    """The seed a ranked case runs with: a keyed hash (BLAKE2b, the secret as its key) of the
    public case seed, 63 bits.

    Whoever sees the result and the public seed learns nothing about the secret: no pairing
    or arithmetic to invert, so even a submission handed ranked seeds cannot tell the next
    secret run's inputs, nor carry the secret out bit by bit.
    """
    import hashlib  # here: only ranked runs need it

    key = (secret_seed % 2**256).to_bytes(32, "big")
    message = str(case_seed).encode()
    digest = hashlib.blake2b(message, key=key, digest_size=8, person=b"cm-case-seed").digest()
    return int.from_bytes(digest, "big") >> 1


def escape_value(value: object) -> str:
    """One protocol line per key: a newline inside a value would start a bogus key."""
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


def parse_result_lines(text: str) -> dict[str, str]:
    """Reads the `key: value` lines a main wrote to the result pipe.

    A line that does not start with a key continues the previous value: harnesses that
    write a multi-line error message unescaped still get their whole message back.
    """
    result: dict[str, str] = {}
    last_key: str | None = None
    # Lines end at "\n" only: other line breaks inside a value cannot start a new key.
    for raw_line in text.removesuffix("\n").split("\n"):
        line = raw_line.removesuffix("\r")
        match = _RESULT_LINE.fullmatch(line)
        if match is not None:
            last_key = match[1]
            result[last_key] = match[2]
        elif last_key is not None:
            result[last_key] += "\n" + line
    return result


_ESCAPES = {"n": "\n", "r": "\r", "\\": "\\"}


def _unescape(value: str) -> str:
    out, i = [], 0
    while i < len(value):
        ch = value[i]
        if ch == "\\" and i + 1 < len(value) and value[i + 1] in _ESCAPES:
            out.append(_ESCAPES[value[i + 1]])
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _decode_report(raw: str) -> str:
    """Profile reports travel base64-encoded (altchars `+*`), as the public harnesses send them."""
    if not raw:
        return ""
    try:
        return base64.b64decode(raw, altchars=b"+*", validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return raw


def encode_report(text: str) -> str:
    return base64.b64encode(text.encode("utf-8"), altchars=b"+*").decode("ascii")


def _count(result: Mapping[str, str], key: str, limit: int | None) -> int:
    """The reported count, never more than the cases we sent (a harness may lie or break)."""
    try:
        count = max(0, int(result.get(key, "0")))
    except ValueError:
        return 0
    return count if limit is None else min(count, limit)


# A case the main never reported on: its process died first (its stderr says why).
NO_RESULT = "no result reported for this test"
NO_TIMINGS = "no timings reported for this benchmark"


def tests_from_result(
    result: Mapping[str, str], limit: int | None = None, specs: Sequence[str] = ()
) -> list[TestOutcome]:
    """`specs` names the cases a main never reached."""
    outcomes = []
    for i in range(_count(result, "test-count", limit)):
        status = result.get(f"test.{i}.status")
        outcomes.append(
            TestOutcome(
                index=i,
                spec=result.get(f"test.{i}.spec") or (specs[i] if i < len(specs) else ""),
                passed=status == "pass",
                error=_unescape(result.get(f"test.{i}.error", ""))
                or ("" if status == "pass" else NO_RESULT),
                message=_unescape(result.get(f"test.{i}.message", "")),
            )
        )
    return outcomes


NOT_RUN = "not run: an earlier case failed"


def benchmarks_from_result(
    result: Mapping[str, str], limit: int | None = None, specs: Sequence[str] = ()
) -> list[BenchmarkOutcome]:
    """`specs` names the cases a main never reached (a ranked run stops at its first failure,
    and logs nothing of the cases after it)."""
    outcomes: list[BenchmarkOutcome] = []
    for i in range(_count(result, "benchmark-count", limit)):
        prefix = f"benchmark.{i}."
        stats: dict[str, float] = {}
        for name in BENCHMARK_STATS:
            raw = result.get(prefix + name)
            if raw is not None:
                try:
                    value = float(raw)
                except ValueError:
                    value = math.nan
                if not math.isfinite(value):
                    stats = {}
                    break
                stats[name] = value
        report = _decode_report(result.get(prefix + "report", ""))
        failed = result.get(prefix + "status") == "fail"
        complete = len(stats) == len(BENCHMARK_STATS) or (bool(report) and not failed)
        error = _unescape(result.get(prefix + "error", ""))
        spec = result.get(prefix + "spec") or (specs[i] if i < len(specs) else "")
        untouched = not (failed or stats or report or error) and prefix + "spec" not in result
        if untouched and any(not o.passed for o in outcomes):
            outcomes.append(BenchmarkOutcome(i, spec, passed=False, error=NOT_RUN, skipped=True))
            continue
        if not failed and not complete:
            error = error or NO_TIMINGS
        outcomes.append(
            BenchmarkOutcome(
                index=i,
                spec=spec,
                passed=complete and not failed,
                runs=int(stats.get("runs", 0)),
                mean=stats.get("mean", 0.0),
                std=stats.get("std", 0.0),
                err=stats.get("err", 0.0),
                best=stats.get("best", 0.0),
                worst=stats.get("worst", 0.0),
                error=error,
                report=report,
                trace=result.get(prefix + "trace", ""),
            )
        )
    return outcomes
