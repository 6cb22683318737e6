"""A task's description, written in Markdown, as HTML that is safe to put in a page: raw HTML
in it is shown as text, links go to http(s) addresses only (anything else stays plain text),
images are left as text (the pages load images from this site only), and headings start
below the page's own."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from markupsafe import Markup

# A description's `#` is the section's own heading level under the page's "Task" (an h2).
HEADING_SHIFT = 2
_HEADING_MARK = re.compile(r"^\s{0,3}#{1,6}\s+")


def _http_only(url: str) -> bool:
    return urlsplit(url.strip()).scheme.lower() in ("http", "https")


def _shift_headings(state: StateCore) -> None:
    for token in state.tokens:
        if token.type in ("heading_open", "heading_close"):
            token.tag = f"h{min(int(token.tag[1:]) + HEADING_SHIFT, 6)}"


def _link_open(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    tokens[idx].attrSet("rel", "nofollow noopener noreferrer")
    return renderer.renderToken(tokens, idx, options, env)


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.disable("image")
    md.validateLink = _http_only  # type: ignore[method-assign]
    md.core.ruler.push("shift_headings", _shift_headings)
    md.add_render_rule("link_open", _link_open)
    return md


_MD = _parser()


def render_markdown(text: str) -> Markup:
    """The description as HTML."""
    html: Any = _MD.render(text)
    return Markup(html)  # noqa: S704 (markdown-it with html off: the task's text is escaped)


def render_summary(text: str) -> Markup:
    """One line of a description (a tile's summary) as inline HTML: no heading marks."""
    html: Any = _MD.renderInline(_HEADING_MARK.sub("", text))
    return Markup(html)  # noqa: S704 (as above)
