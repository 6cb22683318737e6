"""README.md and docs/ held to the tree: a short README that starts with the two commands and
links every page, links between the pages that lead to a file and a heading that exist, and
command lines the CLI accepts as written."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from cluster_manager.cli.common import cli
from tests.conftest import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
MAX_README_LINES = 200
THE_TWO_COMMANDS = ["make demo", "make test"]

FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
INLINE_CODE = re.compile(r"`[^`\n]*`")
# How a command line starts in the pages' shell blocks: the checkout's venv, an installed
# command, or the walk-throughs' shorthand for either.
COMMAND = re.compile(r"^(?:\S*/)?(?:\.venv/bin/cluster-manager|cluster-manager|\$CM)\s")


def blocks(text: str) -> Iterator[tuple[str, list[str]]]:
    """Each fenced block: its info string and its lines."""
    lines = iter(text.splitlines())
    for line in lines:
        if FENCE.match(line):
            info = FENCE.sub("", line).strip()
            body = []
            for inner in lines:
                if FENCE.match(inner):
                    break
                body.append(inner)
            yield info, body


def prose(text: str) -> Iterator[str]:
    """The lines outside fenced blocks, without inline code."""
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            yield INLINE_CODE.sub("", line)


def anchors(page: Path) -> set[str]:
    """Each heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as
    hyphens, a repeated one numbered."""
    seen: dict[str, int] = {}
    found = set()
    for line in prose(page.read_text(encoding="utf-8")):
        if not (heading := re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)):
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def links(page: Path) -> list[str]:
    return [m for line in prose(page.read_text(encoding="utf-8")) for m in LINK.findall(line)]


def relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target)


def test_the_readme_is_short():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; move detail to docs/"


def test_the_readme_begins_with_the_two_commands():
    text = README.read_text(encoding="utf-8")
    title, rest = text.split("\n", 1)
    assert title.startswith("# ")
    assert rest.lstrip("\n").startswith("```bash\n"), "the commands come right after the title"
    _, first = next(blocks(rest))
    commands = [line.split("#", 1)[0].strip() for line in first]
    assert commands == THE_TWO_COMMANDS


def test_every_page_of_docs_is_linked_from_the_readme():
    linked = {(README.parent / t.split("#", 1)[0]).resolve() for t in links(README)}
    assert [p.name for p in PAGES if p.resolve() not in linked] == []


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: p.name)
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(page: Path):
    wrong = []
    for target in filter(relative, links(page)):
        path, _, anchor = target.partition("#")
        where = (page.parent / path).resolve() if path else page
        if not where.exists():
            wrong.append(f"{target}: no such file")
        elif anchor and where.suffix == ".md" and anchor not in anchors(where):
            wrong.append(f"{target}: no such heading in {where.name}")
    assert wrong == []


def test_the_link_check_sees_links_anchors_and_code():
    """The checks above would pass on pages they cannot read; this one cannot."""
    assert "concepts" in anchors(README)
    assert "running-a-competition" in anchors(DOCS / "OPERATING.md")
    assert "docs/ARCHITECTURE.md" in links(README)
    assert not any("](" in line for line in prose("`[a](b)`\n```\n[c](d)\n```"))


def command_lines(page: Path) -> Iterator[str]:
    """The concrete command lines of a page's shell blocks; a synopsis (`[--opt]`, `a|b`,
    `...`) is no line to run."""
    for info, body in blocks(page.read_text(encoding="utf-8")):
        if info not in ("bash", "sh", ""):
            continue
        for line in body:
            code = line.split(" #", 1)[0].strip()
            if COMMAND.match(code) and not re.search(r"\[|\||\.\.\.", code):
                yield code


def refusal(args: list[str]) -> str | None:
    """What the CLI says to these arguments before it would act on them (None: accepted).
    `--help` is eager: every option is parsed, none acts, no command body runs."""
    command: click.Command = cli
    context = click.Context(cli, info_name="cluster-manager")
    while isinstance(command, click.Group):
        if not args:
            return "a group without its command"
        name, *args = args
        sub = command.get_command(context, name)
        if sub is None:
            return f"no command {name!r}"
        command, context = sub, click.Context(sub, info_name=name, parent=context)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            command.make_context(context.info_name, [*args, "--help"], parent=context.parent)
    except click.exceptions.Exit:
        return None
    except click.UsageError as error:
        return error.format_message()
    return "no --help"


def arguments(line: str) -> list[str]:
    # A command substitution stands for one word the shell makes.
    words = shlex.split(re.sub(r"\$\([^()]*\)", "WORD", line))[1:]
    # A redirection and its file are the shell's, not the command's.
    kept = []
    for word in words:
        if word.startswith((">", "<", "2>")):
            break
        kept.append(word)
    return kept


LINES = [(page, line) for page in [README, *PAGES] for line in command_lines(page)]


@pytest.mark.parametrize(("page", "line"), LINES, ids=[f"{p.name}:{x[:60]}" for p, x in LINES])
def test_every_command_line_shown_is_one_the_cli_accepts(page: Path, line: str):
    assert refusal(arguments(line)) is None, f"{page.name}: {line}"


def test_the_command_check_refuses_what_the_cli_would():
    assert len(LINES) >= 30  # README's walks, the pages' examples and the organiser's day
    assert refusal(["submit", "x.py", "--no-such-option"]) == "No such option '--no-such-option'."
    assert refusal(["leaderboard", "no-such-command"]) == "no command 'no-such-command'"
    assert arguments("$CM admin invites spring --mint 20 > codes.txt") == [
        *("admin", "invites", "spring", "--mint", "20"),
    ]
    assert arguments('$CM team join "$($CM team invite s)" --user bob') == [
        *("team", "join", "WORD", "--user", "bob"),
    ]
