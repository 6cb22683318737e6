"""Pass and fail marks drawn as inline SVG, never as emoji: neither the server's browser nor
many users' machines have an emoji font (✅ and ❌ showed as empty boxes). A mark only
decorates: the word beside it (passed, wrong answer, ...) carries the meaning."""

from __future__ import annotations

import re

from markupsafe import Markup

# 16×16 strokes in the text's own colour.
_PATHS = {
    "ok": "M3 8.5l3.2 3.2L13 4.8",
    "bad": "M4 4l8 8M12 4l-8 8",
    "warn": "M8 2.5L14.5 13.5h-13zM8 6.5v3.2M8 11.6v.1",
}
# What the text reports (rendering/reports.py) use, and the mark each becomes on a page.
_EMOJI = {"✅": "ok", "❌": "bad", "⚠️": "warn", "⚠": "warn"}
_ANY_EMOJI = re.compile("(" + "|".join(sorted(_EMOJI, key=len, reverse=True)) + ")")
_SVG = Markup(
    '<svg class="mark mark-{}" viewBox="0 0 16 16" width="16" height="16" '
    'aria-hidden="true" focusable="false"><path d="{}"/></svg>'
)


def mark(kind: str) -> Markup:
    """The mark for `kind` (ok, bad or warn); nothing for any other kind."""
    path = _PATHS.get(kind)
    if path is None:
        return Markup("")
    return _SVG.format(kind, path)


def mark_for(outcome: str) -> Markup:
    """A verdict's mark: a tick for passed, a cross for any other end; none while waiting."""
    if outcome in ("queued", "running", "starting", "dispatched"):
        return Markup("")
    return mark("ok" if outcome == "passed" else "bad")


def with_marks(text: str) -> Markup:
    """Report text (escaped) with its emoji drawn as marks."""
    # Split on the emoji: the text between them is escaped as the marks are joined in.
    parts = _ANY_EMOJI.split(text)
    return Markup("").join(mark(_EMOJI[p]) if p in _EMOJI else p for p in parts)
