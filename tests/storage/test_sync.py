"""Syncing a problem set shaped like the public ones (a competition file beside task folders
that share `../` files): created once, unchanged the second time, a task fix held until
--force, a deadline moved at once, and a malformed file changing nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cluster_manager.core.errors import InvalidCompetitionError
from cluster_manager.core.records import InvalidNameError
from cluster_manager.service.problem_sets import competition_file, load_problem_set
from tests.conftest import EXAMPLES, FIXTURES
from tests.storage.helpers import count_rows

SEASON = """\
name: Season
deadline: "2031-06-01"
problems:
  - {directory: set/vectorsum_py, name: vectorsum, gpus: [CPU, B200]}
  - {directory: set/identity_py, name: identity, deadline: "2031-01-01", gpus: [CPU, H100]}
  - {directory: set/identity_py, name: identity-b200, gpus: [B200]}
"""


@pytest.fixture
def problems(tmp_path: Path) -> Path:
    root = tmp_path / "problems"
    shutil.copytree(FIXTURES / "problemset", root / "set")
    shutil.copytree(EXAMPLES / "identity_py", root / "set" / "identity_py")
    (root / "season.yaml").write_text(SEASON)
    return root


async def sync(service, registry, problems: Path, **options):
    loaded = load_problem_set(competition_file(problems, "season"), registry)
    return await service.problem_sets.sync(loaded.problems, skipped=loaded.skipped, **options)


def actions(plan) -> dict[str, str]:
    return {item.spec.name: item.action.value for item in plan.items}


async def test_sync_creates_then_does_nothing_then_holds_a_task_fix(
    service, registry, pool, problems
):
    first = await sync(service, registry, problems)
    assert actions(first) == {"vectorsum": "create", "identity": "create"}
    assert first.items[0].notes == ("GPU type B200 is not configured here: left out",)
    assert first.skipped[0].startswith("identity-b200: none of its GPU types (B200)")
    board = await service.leaderboards.get("vectorsum")
    assert board.gpus == ("CPU",) and board.deadline.isoformat() == "2031-06-01T00:00:00+00:00"
    assert {f.name for f in board.task.files} >= {"eval.py", "utils.py"}  # the ../ files
    rows = await count_rows(pool)

    again = await sync(service, registry, problems)
    assert actions(again) == {"vectorsum": "unchanged", "identity": "unchanged"}
    assert await count_rows(pool) == rows

    shared = problems / "set" / "utils.py"
    shared.write_text(shared.read_text() + "\n# fixed a tolerance\n")
    held = await sync(service, registry, problems)
    # Both tasks take the shared ../utils.py: both are held, with what changed.
    assert actions(held) == {"vectorsum": "update", "identity": "update"}
    for item in held.items:
        assert item.needs_force
        assert [(c.what, c.detail) for c in item.changes] == [("task file utils.py", "changed")]
    assert held.held(force=False) == list(held.items)
    stored = {f.name: f.content for f in (await service.leaderboards.get("vectorsum")).task.files}
    assert "fixed a tolerance" not in stored["utils.py"]  # held back

    await sync(service, registry, problems, force=True)
    stored = {f.name: f.content for f in (await service.leaderboards.get("vectorsum")).task.files}
    assert "fixed a tolerance" in stored["utils.py"]
    assert actions(await sync(service, registry, problems)) == {
        "vectorsum": "unchanged",
        "identity": "unchanged",
    }


async def test_a_new_problem_whose_deadline_passed_is_skipped(service, registry, problems):
    season = problems / "season.yaml"
    season.write_text(SEASON.replace('"2031-01-01"', '"2029-01-01"'))  # before the clock
    plan = await sync(service, registry, problems)
    assert actions(plan) == {"vectorsum": "create"}
    assert any(s.startswith("identity: its deadline 2029-01-01") for s in plan.skipped)


async def test_a_deadline_or_an_added_gpu_applies_without_force(service, registry, problems):
    await sync(service, registry, problems)
    season = problems / "season.yaml"
    season.write_text(
        SEASON.replace('"2031-01-01"', '"2031-02-01"').replace("[CPU, B200]", "[CPU, H100]")
    )
    plan = await sync(service, registry, problems)
    changes = {i.spec.name: [(c.what, c.detail) for c in i.changes] for i in plan.items}
    assert changes["identity"] == [
        ("deadline", "2031-01-01T00:00:00+00:00 → 2031-02-01T00:00:00+00:00")
    ]
    assert changes["vectorsum"] == [("gpus", "adds H100")]
    assert plan.held(force=False) == []
    assert (await service.leaderboards.get("vectorsum")).gpus == ("CPU", "H100")
    dry = await sync(service, registry, problems, apply=False)
    assert actions(dry) == {"vectorsum": "unchanged", "identity": "unchanged"}


@pytest.mark.reliability(
    "Bad input",
    "syncing a problem set whose file has a bad deadline, a missing task folder, or a "
    "problem with an invalid leaderboard name after a valid new one",
    "a clear error naming the problem and key; not one leaderboard created or changed",
)
@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        (
            ('"2031-01-01"', '"next tuesday"'),
            InvalidCompetitionError,
            "problems[1] (identity).deadline",
        ),
        (
            ("set/identity_py, name: identity,", "set/nope_py, name: identity,"),
            Exception,
            "nope_py",
        ),
        (("name: identity,", "name: Bad Name!,"), InvalidNameError, "Bad Name!"),
    ],
)
async def test_a_malformed_problem_set_changes_nothing(
    service, registry, pool, problems, change, error, message
):
    season = problems / "season.yaml"
    season.write_text(SEASON.replace(*change))
    rows = await count_rows(pool)
    with pytest.raises(
        error, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")
    ):
        await sync(service, registry, problems)
    assert await count_rows(pool) == rows  # vectorsum, valid and first, was not created either
