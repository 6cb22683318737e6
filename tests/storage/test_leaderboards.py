"""Leaderboards: creation rules, what is stored, listing, name search, deletion, task files."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.core.gpus import UnknownGpuError
from cluster_manager.core.records import InvalidNameError, check_leaderboard_name
from cluster_manager.core.task import load_task
from cluster_manager.service import (
    AlreadyExistsError,
    GpuNotAllowedError,
    InvalidDeadlineError,
    NotFoundError,
    PermissionDeniedError,
    Submitter,
    parse_deadline,
)
from cluster_manager.storage import leaderboards as lb_store
from tests.conftest import EXAMPLES, write_task
from tests.storage.helpers import (
    ALICE,
    BOB,
    CAROL,
    DEADLINE,
    TABLES,
    count_rows,
    finish_submission,
    identity_task,
    make_board,
    rows_of_board,
    submit,
)

# --- names ------------------------------------------------------------------------------------


BAD_NAMES = [
    "a" * 65,
    "Upper",
    "has space",
    "a/b",
    "..",
    "",
    "-leading",
    "_leading",
    "dot.name",
    "tab\tname",
    "trailing\n",
    "ümlaut",
    "a%b",
]


@pytest.mark.reliability(
    "Bad input",
    "creating leaderboards with 13 bad names (too long, upper case, space, `/`, `..`, empty, ü)",
    "each refused with InvalidNameError; no leaderboard, GPU or template rows",
)
async def test_create_refuses_bad_names_and_stores_nothing(service, pool, record_property):
    seen: list[str] = []
    for name in BAD_NAMES:
        with pytest.raises(InvalidNameError) as info:
            await make_board(service, name)
        seen.append(str(info.value))
        record_property("observed", f"{len(seen)} refused, e.g. " + " | ".join(seen[:3]))
    assert await count_rows(pool, "leaderboards", "leaderboard_gpus", "templates") == {
        "leaderboards": 0,
        "leaderboard_gpus": 0,
        "templates": 0,
    }


@pytest.mark.reliability(
    "Bad input",
    "leaderboard name too long or with odd characters",
    "refused: InvalidNameError saying what is allowed",
)
@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
def test_bad_names_are_refused_by_the_name_check(name, record_property):
    with pytest.raises(InvalidNameError) as info:
        check_leaderboard_name(name)
    record_property("observed", str(info.value))


async def test_create_accepts_good_names(service):
    names = ["a", "a" * 64, "0-start", "snake_case-and-dash", "x1_2-3"]
    for name in names:
        board = await make_board(service, name)
        assert board.name == name
        assert (await service.leaderboards.get(name)).id == board.id
    assert sorted(await service.leaderboards.names()) == sorted(names)


@pytest.mark.reliability(
    "Bad input",
    "leaderboard name of 65 characters",
    "refused: '65 characters long; the limit is 64'",
)
def test_name_length_message_gives_the_limit(record_property):
    with pytest.raises(InvalidNameError, match="65 characters long; the limit is 64") as info:
        check_leaderboard_name("a" * 65)
    record_property("observed", str(info.value))


@given(st.from_regex(r"[a-z0-9][a-z0-9_\-]{0,63}", fullmatch=True))
def test_every_name_of_the_allowed_alphabet_is_accepted(name):
    assert check_leaderboard_name(name) == name


@pytest.mark.reliability(
    "Bad input",
    "random leaderboard names with a character outside [a-z0-9_-] (property-based, hypothesis)",
    "every one refused with InvalidNameError",
)
@given(
    st.text(min_size=1, max_size=64).filter(
        lambda s: any(c not in "abcdefghijklmnopqrstuvwxyz0123456789_-" for c in s)
    )
)
def test_every_name_with_another_character_is_refused(name):
    with pytest.raises(InvalidNameError):
        check_leaderboard_name(name)


# --- creation rules -------------------------------------------------------------------------


@pytest.mark.reliability(
    "Bad input",
    "creating a leaderboard whose name is taken (other task, GPUs, creator)",
    "refused: 'a leaderboard named 'dup' already exists'; the first unchanged, nothing stored",
)
async def test_duplicate_name_is_refused_and_the_first_is_untouched(
    service, pool, tmp_path, record_property
):
    first = await make_board(service, "dup", gpus=["CPU"], rate_limit_per_hour=5)
    before = await count_rows(pool)
    other_task = load_task(write_task(tmp_path / "other"))
    with pytest.raises(AlreadyExistsError, match="dup") as info:
        await make_board(
            service,
            "dup",
            gpus=["H100", "CPU"],
            task=other_task,
            creator=BOB,
            rate_limit_per_hour=9,
        )
    record_property("observed", str(info.value))
    assert await count_rows(pool) == before  # not even the creator was stored
    again = await service.leaderboards.get("dup")
    assert again == first
    assert again.gpus == ("CPU",)
    assert again.task == identity_task()
    assert await service.leaderboards.templates("dup") == identity_task().templates


@pytest.mark.reliability(
    "Bad input",
    "5 concurrent creations of one leaderboard name",
    "one created, 4 refused with AlreadyExistsError; stored once",
)
async def test_concurrent_creation_of_one_name_stores_it_once(service, pool, record_property):
    outcomes = await asyncio.gather(
        *(make_board(service, "race", gpus=["CPU"]) for _ in range(5)),
        return_exceptions=True,
    )
    created = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, BaseException)]
    record_property(
        "observed",
        f"{len(created)} created, {len(refused)} refused: {refused[0] if refused else ''}",
    )
    assert len(created) == 1
    assert len(refused) == 4
    assert all(isinstance(e, AlreadyExistsError) for e in refused)
    assert await count_rows(pool, "leaderboards", "leaderboard_gpus") == {
        "leaderboards": 1,
        "leaderboard_gpus": 1,
    }


@pytest.mark.reliability(
    "Bad input",
    "creating a leaderboard with a deadline in the past (or exactly now, or past in another zone)",
    "refused: 'the deadline … has already passed'; nothing stored",
)
async def test_deadline_in_the_past_is_refused(service, pool, record_property):
    for deadline in [
        datetime(2030, 1, 1, 11, 59, tzinfo=UTC),
        datetime(2030, 1, 1, 12, 0, tzinfo=UTC),  # exactly now is not in the future
        datetime(2029, 6, 1, tzinfo=UTC),
        # 13:00 at +02:00 is 11:00 UTC: already past although the wall time looks later.
        datetime(2030, 1, 1, 13, 0, tzinfo=timezone(timedelta(hours=2))),
    ]:
        with pytest.raises(InvalidDeadlineError, match="already passed") as info:
            await make_board(service, deadline=deadline)
        record_property("observed", str(info.value))
    assert await count_rows(pool, "leaderboards") == {"leaderboards": 0}


async def test_deadline_just_after_now_is_accepted(service, clock):
    board = await make_board(service, deadline=clock.now + timedelta(seconds=1))
    assert board.deadline == clock.now + timedelta(seconds=1)


@pytest.mark.reliability(
    "Bad input",
    "creating a leaderboard with a deadline without time zone",
    "refused: 'the deadline needs a time zone'; nothing stored",
)
async def test_naive_deadline_is_refused(service, pool, record_property):
    with pytest.raises(InvalidDeadlineError, match="time zone") as info:
        await make_board(service, deadline=datetime(2031, 1, 1))
    record_property("observed", str(info.value))
    assert await count_rows(pool, "leaderboards") == {"leaderboards": 0}


@pytest.mark.reliability(
    "Bad input",
    "creating a leaderboard on an unknown GPU type (A100)",
    "refused: error naming 'A100'; no leaderboard or GPU rows",
)
async def test_unknown_gpu_is_refused(service, pool, record_property):
    with pytest.raises(UnknownGpuError, match="A100") as info:
        await make_board(service, gpus=["CPU", "A100"])
    record_property("observed", str(info.value))
    assert await count_rows(pool, "leaderboards", "leaderboard_gpus") == {
        "leaderboards": 0,
        "leaderboard_gpus": 0,
    }


@pytest.mark.reliability(
    "Bad input",
    "creating a leaderboard with a GPU listed twice",
    "refused: 'GPU types listed twice'; nothing stored",
)
async def test_gpu_listed_twice_is_refused(service, pool, record_property):
    with pytest.raises(GpuNotAllowedError, match="twice") as info:
        await make_board(service, gpus=["CPU", "H100", "CPU"])
    record_property("observed", str(info.value))
    assert await count_rows(pool, "leaderboards") == {"leaderboards": 0}


@pytest.mark.reliability(
    "Bad input",
    "creating a leaderboard with no GPU",
    "refused: 'a leaderboard needs at least one GPU type'; nothing stored",
)
async def test_zero_gpus_are_refused(service, pool, record_property):
    with pytest.raises(GpuNotAllowedError, match="at least one GPU") as info:
        await make_board(service, gpus=[])
    record_property("observed", str(info.value))
    assert await count_rows(pool, "leaderboards") == {"leaderboards": 0}


@pytest.mark.reliability(
    "Bad input",
    "creating a leaderboard with a rate limit of 0 or below",
    "refused: 'the rate limit must be a positive number'; nothing stored",
)
async def test_rate_limit_must_be_positive(service, pool, record_property):
    for limit in (0, -1, -30):
        with pytest.raises(ClusterManagerError, match="rate limit") as info:
            await make_board(service, rate_limit_per_hour=limit)
        record_property("observed", str(info.value))
    assert await count_rows(pool, "leaderboards") == {"leaderboards": 0}


# --- what is stored ---------------------------------------------------------------------------


async def test_created_leaderboard_round_trips(service, pool, clock):
    task = identity_task()
    board = await make_board(
        service, "ident", gpus=["H100", "CPU"], creator=ALICE, rate_limit_per_hour=7
    )
    assert board.name == "ident"
    assert board.deadline == DEADLINE
    assert board.task == task
    assert board.description == task.description != ""
    assert board.gpus == ("CPU", "H100")
    assert board.creator == "alice"
    assert board.rate_limit_per_hour == 7
    assert board.is_open(clock.now)
    assert not board.is_open(DEADLINE)
    # Read back through every path, it is the same leaderboard.
    assert await lb_store.get_leaderboard_by_id(pool, board.id) == board
    assert await service.leaderboards.get("ident") == board
    rows = await pool.fetch(
        "SELECT gpu FROM leaderboard_gpus WHERE leaderboard_id = $1 ORDER BY gpu", board.id
    )
    assert [r["gpu"] for r in rows] == ["CPU", "H100"]
    templates = await pool.fetch(
        "SELECT language, code FROM templates WHERE leaderboard_id = $1", board.id
    )
    assert {r["language"]: r["code"] for r in templates} == task.templates
    assert task.templates["Python"] == (EXAMPLES / "identity_py" / "template.py").read_text()
    creator = await pool.fetchrow("SELECT external_id, name FROM users")
    assert (creator["external_id"], creator["name"]) == ("alice", "Alice")


async def test_every_example_task_round_trips(service):
    examples = ["identity_py", "vectoradd_py", "vectoradd_cu", "softmax_py", "allreduce_py"]
    for example in examples:
        task = load_task(EXAMPLES / example)
        name = example.replace("_", "-")
        await make_board(service, name, task=task)
        stored = (await service.leaderboards.get(name)).task
        assert stored == task, example
        assert stored.lang == task.lang
    cuda = (await service.leaderboards.get("vectoradd-cu")).task.cuda
    assert cuda is not None
    assert cuda.sources == ("eval.cu", "submission.cu")
    assert (await service.leaderboards.get("allreduce-py")).task.multi_gpu


@pytest.mark.reliability(
    "Bad input",
    "a multi-GPU task (world_size 2) on a GPU type whose machines have 1 device",
    "refused at create, naming both numbers; nothing stored",
)
async def test_a_multi_gpu_task_needs_as_many_devices(service, pool, record_property):
    task = load_task(EXAMPLES / "allreduce_py")
    assert task.processes == 2
    with pytest.raises(GpuNotAllowedError) as caught:
        await make_board(service, "ranks", task=task, gpus=["CPU", "H100"])
    record_property("observed", str(caught.value))
    assert "runs 2 processes" in str(caught.value) and "has 1 device(s)" in str(caught.value)
    assert await pool.fetchval("SELECT count(*) FROM leaderboards") == 0
    await make_board(service, "ranks", task=task, gpus=["CPU"])  # 2 devices: enough


async def test_secret_seed_is_stored_and_differs_between_leaderboards(service, pool):
    first = await make_board(service, "one")
    second = await make_board(service, "two")
    seeds = {
        await lb_store.secret_seed(pool, first.id),
        await lb_store.secret_seed(pool, second.id),
    }
    assert all(0 <= s < 2**31 for s in seeds)
    assert len(seeds) == 2  # 1 in 2**31 to collide


async def test_default_rate_limit_is_null(service, pool):
    board = await make_board(service)
    assert board.rate_limit_per_hour is None
    assert board.creator is None
    stored = await pool.fetchval("SELECT rate_limit_per_hour FROM leaderboards")
    assert stored is None


async def test_task_without_templates_stores_none(service, pool, tmp_path):
    task = load_task(write_task(tmp_path / "plain"))
    assert task.templates == {}
    await make_board(service, "plain", task=task)
    assert await service.leaderboards.templates("plain") == {}
    assert await count_rows(pool, "templates") == {"templates": 0}


@pytest.mark.reliability(
    "Bad input",
    "show, templates, task files, ranking or delete of an unknown leaderboard",
    "refused: NotFoundError 'there is no leaderboard named 'nope''",
)
async def test_unknown_leaderboard_is_not_found(service, record_property):
    with pytest.raises(NotFoundError, match="nope") as info:
        await service.leaderboards.get("nope")
    record_property("observed", str(info.value))
    for call in (
        service.leaderboards.templates,
        service.leaderboards.task_files,
        service.leaderboards.ranking,
        service.leaderboards.delete,
    ):
        with pytest.raises(NotFoundError):
            await call("nope")


# --- listing and name search ------------------------------------------------------------------


async def test_list_orders_by_deadline_and_counts_submissions(service, clock):
    await make_board(service, "late", deadline=datetime(2032, 1, 1, tzinfo=UTC), gpus=["H100"])
    await make_board(service, "early", deadline=datetime(2030, 6, 1, tzinfo=UTC))
    await make_board(service, "b-middle", deadline=datetime(2031, 1, 1, tzinfo=UTC))
    await make_board(
        service, "a-middle", deadline=datetime(2031, 1, 1, tzinfo=UTC), gpus=["H100", "CPU"]
    )
    await submit(service, "early", ALICE)
    await submit(service, "early", BOB)
    await submit(service, "a-middle", ALICE, gpus=["CPU", "H100"])
    summaries = await service.leaderboards.all()
    assert [s.name for s in summaries] == ["early", "a-middle", "b-middle", "late"]
    by_name = {s.name: s for s in summaries}
    assert by_name["early"].submissions == 2
    assert by_name["a-middle"].submissions == 1  # one submission, however many GPUs
    assert by_name["b-middle"].submissions == 0
    assert by_name["late"].submissions == 0
    assert by_name["a-middle"].gpus == ("CPU", "H100")
    assert by_name["late"].gpus == ("H100",)
    assert by_name["early"].deadline == datetime(2030, 6, 1, tzinfo=UTC)


async def test_list_is_empty_without_leaderboards(service):
    assert await service.leaderboards.all() == []
    assert await service.leaderboards.names() == []


async def test_names_hold_what_was_typed_those_starting_with_it_first(service):
    for name in ["abc", "abd", "ab", "b-ab", "xyz"]:
        await make_board(service, name)
    assert await service.leaderboards.names() == ["ab", "abc", "abd", "b-ab", "xyz"]
    assert await service.leaderboards.names("ab") == ["ab", "abc", "abd", "b-ab"]
    assert await service.leaderboards.names("abc") == ["abc"]
    assert await service.leaderboards.names("abcd") == []
    assert await service.leaderboards.names("b") == ["b-ab", "ab", "abc", "abd"]


@pytest.mark.reliability(
    "Bad input",
    "leaderboard name search with SQL LIKE wildcards (`%`, `_`, backslash)",
    "matched literally: `%` finds nothing, `ab_` finds only 'ab_1'",
)
async def test_names_treat_underscore_and_percent_literally(service):
    for name in ["ab_1", "abx1", "ab-1", "a_"]:
        await make_board(service, name)
    assert await service.leaderboards.names("ab_") == ["ab_1"]
    assert await service.leaderboards.names("a_") == ["a_"]
    assert await service.leaderboards.names("%") == []
    assert await service.leaderboards.names("a%") == []
    assert await service.leaderboards.names("_") == ["a_", "ab_1"]
    assert await service.leaderboards.names("\\") == []


async def test_names_are_limited(service, pool):
    names = [f"board-{i:02d}" for i in range(30)]
    for name in names:
        await make_board(service, name)
    assert await service.leaderboards.names("board") == names[:25]
    found = await lb_store.leaderboard_names(pool, None, True, "board-2", service.clock(), limit=3)
    assert found == [(name, True) for name in names[20:23]]  # each with whether it is open


# --- deletion ---------------------------------------------------------------------------------


async def _two_busy_boards(service, pool):
    keep = await make_board(service, "keep", gpus=["CPU", "H100"])
    gone = await make_board(service, "gone", gpus=["CPU", "H100"], creator=CAROL)
    shared_code = "def custom_kernel(data):\n    return data.clone()  # shared\n"
    for board in ("keep", "gone"):
        for user, score in ((ALICE, 1.0), (BOB, 2.0)):
            receipt = await submit(service, board, user, gpus=["CPU", "H100"])
            await finish_submission(pool, receipt, score)
        await submit(service, board, ALICE, gpus=["CPU"], code=shared_code)  # left queued
    return keep, gone


async def test_delete_removes_everything_of_that_leaderboard_only(service, pool):
    keep, gone = await _two_busy_boards(service, pool)
    before_total = await count_rows(pool)
    before_keep = await rows_of_board(pool, keep.id)
    before_gone = await rows_of_board(pool, gone.id)
    assert before_gone == {
        "leaderboards": 1,
        "leaderboard_gpus": 2,
        "templates": 1,
        "submissions": 3,
        "jobs": 2 * 4 + 2,
        "runs": 2 * 4,
        "rankings": 2 * 2,
    }
    assert before_keep == before_gone

    await service.leaderboards.delete("gone")

    assert await rows_of_board(pool, gone.id) == dict.fromkeys(before_gone, 0)
    assert await rows_of_board(pool, keep.id) == before_keep
    after_total = await count_rows(pool)
    expected = {t: before_total[t] - before_gone.get(t, 0) for t in TABLES}
    expected["users"] = before_total["users"]  # people stay
    expected["code_files"] = before_total["code_files"]  # files may be shared
    assert after_total == expected
    with pytest.raises(NotFoundError):
        await service.leaderboards.get("gone")
    assert [s.name for s in await service.leaderboards.all()] == ["keep"]
    ranking = await service.leaderboards.ranking("keep")
    assert [e.user for e in ranking["CPU"]] == ["alice", "bob"]
    assert [e.user for e in ranking["H100"]] == ["alice", "bob"]


async def test_name_is_free_again_after_delete(service, pool):
    await make_board(service, "again", gpus=["CPU"])
    await service.leaderboards.delete("again")
    board = await make_board(service, "again", gpus=["H100"])
    assert board.gpus == ("H100",)
    assert await count_rows(pool, "leaderboard_gpus") == {"leaderboard_gpus": 1}


async def test_non_admin_creator_may_delete(service):
    await make_board(service, "mine", creator=ALICE)
    await service.leaderboards.delete("mine", actor=Submitter("alice", "renamed"), admin=False)
    with pytest.raises(NotFoundError):
        await service.leaderboards.get("mine")


async def test_other_non_admin_may_not_delete(service, pool):
    await make_board(service, "mine", creator=ALICE)
    await submit(service, "mine", ALICE)
    before = await count_rows(pool)
    for actor in (BOB, None, Submitter("Alice", "Alice")):
        with pytest.raises(PermissionDeniedError):
            await service.leaderboards.delete("mine", actor=actor, admin=False)
    assert await count_rows(pool) == before
    assert (await service.leaderboards.get("mine")).creator == "alice"


async def test_non_admin_may_not_delete_a_leaderboard_without_creator(service):
    await make_board(service, "orphan")
    with pytest.raises(PermissionDeniedError):
        await service.leaderboards.delete("orphan", actor=ALICE, admin=False)
    await service.leaderboards.get("orphan")


async def test_admin_may_delete_what_others_created(service):
    await make_board(service, "theirs", creator=ALICE)
    await service.leaderboards.delete("theirs", actor=BOB, admin=True)
    with pytest.raises(NotFoundError):
        await service.leaderboards.get("theirs")


# --- task files and templates -----------------------------------------------------------------


async def test_task_files_exclude_the_submission_slot(service):
    task = identity_task()
    await make_board(service, "files")
    files = await service.leaderboards.task_files("files")
    assert task.submission_name == "submission.py"
    assert set(files) == {"task.py", "reference.py", "utils.py", "template.py", "task.yml"}
    assert files["task.py"] == (EXAMPLES / "identity_py" / "task.py").read_text()
    assert files["utils.py"] == (EXAMPLES / "utils.py").read_text()
    readable = {f.name: f.content for f in task.files if not f.is_submission}
    assert {name: files[name] for name in readable} == readable
    assert "submission.py" not in files


async def test_templates_come_from_the_task(service, tmp_path: Path):
    task = load_task(write_task(tmp_path / "tmpl", extra={"templates": {"Python": "reference.py"}}))
    await make_board(service, "tmpl", task=task)
    templates = await service.leaderboards.templates("tmpl")
    assert templates == {"Python": (tmp_path / "tmpl" / "reference.py").read_text()}
    templates["Python"] = "changed"  # a copy: the stored task is not touched
    assert (await service.leaderboards.templates("tmpl"))["Python"] != "changed"


# --- parse_deadline ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2031-05-06T07:08:09+00:00", datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)),
        ("2031-05-06T07:08:09+02:00", datetime(2031, 5, 6, 5, 8, 9, tzinfo=UTC)),
        ("2031-05-06T07:08:09-05:30", datetime(2031, 5, 6, 12, 38, 9, tzinfo=UTC)),
        ("2031-05-06T07:08:09Z", datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)),
        ("2031-05-06T07:08:09", datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)),
        ("2031-05-06 07:08", datetime(2031, 5, 6, 7, 8, tzinfo=UTC)),
        ("2031-05-06", datetime(2031, 5, 6, tzinfo=UTC)),
        ("  2031-05-06T07:08:09Z\n", datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)),
    ],
)
def test_parse_deadline(raw, expected):
    parsed = parse_deadline(raw)
    assert parsed == expected
    assert parsed.tzinfo is not None


def test_parse_deadline_keeps_the_given_offset():
    parsed = parse_deadline("2031-05-06T07:08:09+02:00")
    assert parsed.utcoffset() == timedelta(hours=2)
    assert parse_deadline("2031-05-06T07:08:09").utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    "raw",
    ["", "   ", "tomorrow", "2031-13-01", "2031-02-30T00:00", "31/12/2031", "2031-05-06T25:00"],
    ids=repr,
)
@pytest.mark.reliability(
    "Bad input",
    "unparseable deadline ('', 'tomorrow', month 13, Feb 30, 31/12/2031, hour 25)",
    "refused: 'cannot read deadline …' asking for ISO 8601",
)
def test_parse_deadline_refuses_garbage(raw, record_property):
    with pytest.raises(InvalidDeadlineError, match="ISO 8601") as info:
        parse_deadline(raw)
    record_property("observed", str(info.value))


@given(st.datetimes(timezones=st.just(UTC)))
def test_parse_deadline_reads_its_own_iso_format(moment):
    assert parse_deadline(moment.isoformat()) == moment


async def test_parsed_deadline_creates_a_leaderboard(service):
    board = await make_board(service, deadline=parse_deadline("2030-01-02T00:00:00Z"))
    assert board.deadline == datetime(2030, 1, 2, tzinfo=UTC)


# --- nothing is half-stored -------------------------------------------------------------------


@pytest.mark.reliability(
    "Bad input",
    "a crash right after the leaderboard, its GPUs and templates are written, before commit",
    "the whole creation rolls back: no leaderboard, GPU, template or creator rows",
)
async def test_a_crash_midway_through_creation_stores_nothing(
    service, pool, monkeypatch, record_property
):
    real_insert = lb_store.insert_leaderboard
    written: list[dict[str, int]] = []

    async def insert_then_crash(conn, **kwargs):
        leaderboard_id = await real_insert(conn, **kwargs)
        # Inside the transaction the rows are there ...
        written.append({t: await conn.fetchval(f"SELECT count(*) FROM {t}") for t in TABLES[:4]})
        raise RuntimeError(f"crash after writing leaderboard {leaderboard_id}")

    monkeypatch.setattr(lb_store, "insert_leaderboard", insert_then_crash)
    with pytest.raises(RuntimeError, match="crash after writing"):
        await make_board(service, "half", gpus=["CPU", "H100"], creator=ALICE)
    after = await count_rows(pool)
    left = {t: n for t, n in after.items() if n} or "no rows in any table"
    record_property("observed", f"in the transaction: {written[0]}; after the crash: {left}")
    assert written == [{"users": 1, "leaderboards": 1, "leaderboard_gpus": 2, "templates": 1}]
    # ... and after the crash none of them is.
    assert after == dict.fromkeys(TABLES, 0)
    with pytest.raises(NotFoundError):
        await service.leaderboards.get("half")


@pytest.mark.reliability(
    "Bad input",
    "task whose template file holds a NUL byte (Postgres text cannot store it)",
    "refused with a clear error naming the file; nothing stored",
)
async def test_a_template_with_a_nul_byte_is_refused_cleanly(
    service, pool, tmp_path, record_property
):
    folder = write_task(tmp_path / "nul", extra={"templates": {"Python": "reference.py"}})
    with (folder / "reference.py").open("a") as fh:
        fh.write("# \x00\n")
    with pytest.raises(ClusterManagerError) as info:
        await make_board(service, "nul", task=load_task(folder), creator=ALICE)
    record_property("observed", str(info.value))
    assert "reference.py" in str(info.value)
    assert await count_rows(pool) == dict.fromkeys(TABLES, 0)
