"""Characters a file name must not hold: ones that draw nothing or rearrange what is drawn
(controls, U+202E right-to-left override, zero-width marks), so that a name shown to a person
reads as what it is (`gnp.py` is not `‮yp.png`)."""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Iterable

# Unicode categories of such characters: controls (Cc), formats (Cf: bidi overrides and
# isolates, zero-width joiners and spaces), line and paragraph separators (Zl, Zp).
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})


def hidden_characters(name: str) -> list[str]:
    """The code points in `name` that a reader would not see as written, as U+XXXX."""
    return [f"U+{ord(c):04X}" for c in name if unicodedata.category(c) in HIDDEN_CATEGORIES]


def hidden_problem(name: str) -> str | None:
    """Why `name` cannot be a file's name, if it holds such characters."""
    found = hidden_characters(name)
    if not found:
        return None
    return f"holds characters that do not show as written ({', '.join(dict.fromkeys(found))})"


def same_but_case(given: str, known: Iterable[str]) -> str | None:
    """`given` as `known` spells it: itself, or the one known name that differs from it only
    in case (`cpu` is `CPU`); None when there is no such name, or several."""
    names = list(known)
    if given in names:
        return given
    same = [name for name in names if name.casefold() == given.casefold()]
    return same[0] if len(same) == 1 else None


def close_names(given: str, known: Iterable[str]) -> list[str]:
    """The known names `given` was most likely a typo of (without case: `h10` is `H100`'s)."""
    by_folded: dict[str, list[str]] = {}
    for name in known:
        by_folded.setdefault(name.casefold(), []).append(name)
    folded = difflib.get_close_matches(given.casefold(), by_folded, n=3, cutoff=0.6)
    return [name for f in folded for name in by_folded[f]]


def did_you_mean(given: str, known: Iterable[str]) -> str:
    """`; did you mean X?` for a mistyped name, or nothing when no known name is close."""
    close = close_names(given, known)
    return f"; did you mean {' or '.join(close)}?" if close else ""
