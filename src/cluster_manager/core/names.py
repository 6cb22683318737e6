"""Characters a file name must not hold: ones that draw nothing or rearrange what is drawn
(controls, U+202E right-to-left override, zero-width marks), so that a name shown to a person
reads as what it is (`gnp.py` is not `‮yp.png`)."""

from __future__ import annotations

import unicodedata

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
