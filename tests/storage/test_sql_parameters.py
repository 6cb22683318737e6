"""SQL is always parameterised: hostile text is stored as text, and no query in src is built
from anything but constants."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from cluster_manager.service import Submitter
from cluster_manager.storage import submissions as sub_store
from tests.conftest import ROOT
from tests.storage.helpers import TABLES, count_rows, kernel_code, make_board, submit

HOSTILE = "x'); DROP TABLE runs; --"
# asyncpg's query methods: their first argument is the SQL text.
QUERY_METHODS = {"execute", "executemany", "fetch", "fetchrow", "fetchval", "prepare", "cursor"}


@pytest.mark.reliability(
    "Access",
    f"SQL in a submitter's id, name, code and a name search: {HOSTILE!r}",
    "stored and matched as plain text; every table is still there",
)
async def test_hostile_text_is_stored_as_text(service, pool, record_property):
    await make_board(service)
    user = Submitter(HOSTILE, f'{HOSTILE} " ; DELETE FROM users; --')
    code = f"{kernel_code()}# {HOSTILE}\n"
    receipt = await submit(service, user=user, code=code)

    stored = await sub_store.get_submission(pool, receipt.submission_id)
    users = await pool.fetch("SELECT external_id, name FROM users")
    names = await service.leaderboards.names("%'; DROP TABLE leaderboards; --")
    tables = await count_rows(pool, *TABLES)
    verbatim = stored is not None and stored.code == code
    verbatim &= [tuple(u) for u in users] == [(user.external_id, user.name)]
    record_property(
        "observed",
        f"user and code {'stored verbatim' if verbatim else 'ALTERED'}; the name search found "
        f"{names}; all {len(tables)} tables still answer",
    )
    assert stored is not None and stored.code == code
    assert [tuple(u) for u in users] == [(user.external_id, user.name)]
    assert names == []
    assert tables["runs"] == 0 and tables["submissions"] == 1
    assert len(await service.leaderboards.personal_runs("board", user)) == 0


def _static(node: ast.expr) -> bool:
    """A query text made of literals and UPPER_CASE module constants only."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.Name):
        return node.id.lstrip("_").isupper()
    if isinstance(node, ast.JoinedStr):
        return all(
            isinstance(part, ast.Constant)
            or (isinstance(part, ast.FormattedValue) and _static(part.value))
            for part in node.values
        )
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _static(node.left) and _static(node.right)
    return _quoted_names(node)


def _quoted_names(node: ast.expr) -> bool:
    """`sql.SQL("... {} ...").format(sql.Identifier(name))`: psycopg's composition for what
    cannot be a parameter (a schema's name), each name quoted as an identifier."""
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(node.func.value, ast.Call)
    ):
        return False
    template = node.func.value
    return (
        ast.unparse(template.func) == "sql.SQL"
        and len(template.args) == 1
        and _static(template.args[0])
        and not node.keywords
        and all(
            isinstance(arg, ast.Call) and ast.unparse(arg.func) == "sql.Identifier"
            for arg in node.args
        )
    )


def _forwarded(call: ast.Call) -> bool:
    """`super().fetch(*args, ...)`: the pool's connection class passes its caller's query on."""
    target = call.func.value if isinstance(call.func, ast.Attribute) else None
    return (
        isinstance(call.args[0], ast.Starred)
        and isinstance(target, ast.Call)
        and isinstance(target.func, ast.Name)
        and target.func.id == "super"
    )


@pytest.mark.reliability(
    "Access",
    "a query in src whose SQL text is built from a value (f-string, concatenation, format)",
    "none: every query text is a literal or built from constants; values go as $n parameters, "
    "names (a schema) as psycopg identifiers",
)
def test_every_query_text_in_src_is_constant(record_property):
    queries, built = 0, []
    for path in sorted((ROOT / "src").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in QUERY_METHODS
                and node.args
            ):
                continue
            if _forwarded(node):
                continue
            queries += 1
            if not _static(node.args[0]):
                where = Path(path).relative_to(ROOT)
                built.append(f"{where}:{node.lineno}: {ast.unparse(node.args[0])[:80]}")
    record_property("observed", f"{queries} query calls in src, {len(built)} built from values")
    assert queries > 30  # the scan found the storage layer
    assert built == []
