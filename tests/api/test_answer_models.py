"""The API's answers written by the server and read back by the CLI's client: each model's
JSON, written as FastAPI writes it, read with `Model.model_validate` as `RemoteService` reads
it, has the same values; the records the client makes of it equal those the service answered
with, less what the API keeps on the server (which reads as the record's neutral value)."""

from __future__ import annotations

import dataclasses
import importlib
import json
import pkgutil
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter

import cluster_manager.api.models as models_package
from cluster_manager.api.models.admin import (
    Banned,
    BanView,
    CustomQuotaView,
    InviteView,
    Minted,
    PauseView,
    QuotaSet,
    Started,
    StatsView,
    Stopped,
    UserQuotasView,
)
from cluster_manager.api.models.answers import (
    Detail,
    Health,
    InviteRevoked,
    Joined,
    LeaderboardDone,
    QueuesView,
    SubmissionDone,
    UserDone,
)
from cluster_manager.api.models.base import ApiModel
from cluster_manager.api.models.leaderboard_admin import (
    AfterDeadlineRefusalView,
    AfterDeadlineSet,
    ChannelPolicySet,
    ChannelPolicySettingView,
    ProblemSetSync,
    Rerun,
    TeamRulesSet,
)
from cluster_manager.api.models.leaderboards import (
    LeaderboardCreated,
    LeaderboardListed,
    RankingView,
    TaskFiles,
)
from cluster_manager.api.models.runs import RunView
from cluster_manager.api.models.submissions import (
    SubmissionSummary,
    SubmissionView,
    SubmitAccepted,
)
from cluster_manager.api.models.teams import TeamCode, TeamLeft, TeamView
from cluster_manager.core.models import Mode, Verdict
from cluster_manager.core.records import (
    ChannelPolicy,
    Job,
    JobState,
    Leaderboard,
    LeaderboardSummary,
    Placement,
    RankingEntry,
    RunRecord,
)
from cluster_manager.core.run_results import CompileOutcome, RunResult
from cluster_manager.core.sync_plan import Action, Change, PlanItem, ProblemSpec, SyncPlan
from cluster_manager.core.task import load_task
from cluster_manager.core.teams import Team
from cluster_manager.service import QueueStatus, QueueView, SubmissionReceipt, SubmissionReport
from cluster_manager.service.port import (
    AfterDeadlineRefusal,
    Ban,
    ChannelPolicySetting,
    CustomQuota,
    GpuQueue,
    GpuStats,
    Invite,
    OpenJob,
    Pause,
    Stats,
    StoredSubmission,
    UserQuotas,
)
from cluster_manager.service.rules import HELD_RERUN
from tests.support.speed_helpers import H100, VECTORADD, ranked_result

WHEN = datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)
LATER = datetime(2026, 3, 4, 5, 7, 0, tzinfo=UTC)
TASK = load_task(VECTORADD)
# What the API keeps on the server is the record's neutral value here (no creator, no rate
# limit of its own), so that the record read back equals it.
BOARD = Leaderboard(
    id=7,
    name="vectoradd",
    deadline=WHEN,
    description="adds vectors",
    task=TASK,
    gpus=("H100", "CPU"),
    creator=None,
    created_at=WHEN,
    closed=True,
    channel_policy=ChannelPolicy.ALL,
    after_deadline_runs=False,
    team_size=3,
    team_quotas=True,
)
ENTRY = RankingEntry(1, "alice", 3.1e-05, 11, WHEN, team="red")
# A job's run, lease and tries stay on the server: neutral here.
PUBLIC = Job(
    *(11, 11, "H100", Mode.LEADERBOARD, False, JobState.FINISHED, "local", None, 0, None),
    dispatched_at=WHEN,
    heartbeat_at=LATER,
)
SECRET = Job(12, 11, "H100", Mode.LEADERBOARD, True, JobState.FAILED, None, None, 0, None, "lost")
SUBMISSION = StoredSubmission(
    id=11,
    leaderboard_id=7,
    leaderboard="vectoradd",
    user_id=0,
    user="alice",
    file_name="submission.py",
    code="def custom_kernel(data): ...\n",
    mode=Mode.LEADERBOARD,
    submitted_at=WHEN,
    invalidated="copied (by admin)",
    after_deadline=True,
)
RESULT = ranked_result(TASK, [40_000.0, 80_000.0, 160_000.0], H100)
READABLE = RunRecord(
    job_id=11,
    submission_id=11,
    leaderboard="vectoradd",
    user="alice",
    gpu="H100",
    mode=Mode.LEADERBOARD,
    secret=False,
    passed=True,
    verdict=Verdict.PASSED,
    score=RESULT.score,
    file_name="submission.py",
    submitted_at=WHEN,
    created_at=LATER,
    result=RESULT.to_json(),
)
# A secret run as its author reads it: that it passed and is held, never its result.
REDACTED = dataclasses.replace(
    READABLE, job_id=12, secret=True, score=None, result={"held": HELD_RERUN}, redacted=True
)
# A CUDA submission that did not compile: no phase ran, the compiler's output is all there is.
UNCOMPILED = RunResult(
    False,
    Verdict.COMPILE_ERROR,
    Mode.TEST,
    "compilation failed",
    compilation=CompileOutcome(False, ("nvcc", "submission.cu"), "error: expected ';'", 0.5),
)
UNCOMPILED_RUN = dataclasses.replace(
    READABLE,
    mode=Mode.TEST,
    passed=False,
    verdict=Verdict.COMPILE_ERROR,
    score=None,
    result=UNCOMPILED.to_json(),
)
REPORT = SubmissionReport(SUBMISSION, (PUBLIC, SECRET), (READABLE, REDACTED))
RECEIPT = SubmissionReceipt(11, "vectoradd", "alice", "submission.py", Mode.LEADERBOARD, (PUBLIC,))
QUEUE = QueueStatus("H100", "local", 3, 1)
PLACEMENT = Placement("H100", 2, 3.1e-05, True, 4.5e-05, after_deadline=True)
QUEUES = QueueView(
    [GpuQueue("H100", 3, 1, True), GpuQueue("CPU", 0, 0, False)],
    [OpenJob(11, 11, "vectoradd", "H100", False, "queued", 2)],
)
TEAM = Team("vectoradd", "red", ("alice", "bob"), WHEN, 3)
PAUSE = Pause(None, "maintenance", "admin (API)", WHEN)
BAN = Ban("mallory", "Mallory", "spam", "admin (API)", WHEN)
INVITE = Invite("inv_abc", "vectoradd", 2, 1, "admin (API)", WHEN, False)
CUSTOM = CustomQuota("alice", "Alice", 5, None, "admin (API)", WHEN)
QUOTAS = UserQuotas("alice", "Alice", 5, 3, 500, False, CUSTOM)
REFUSAL = AfterDeadlineRefusal("vectoradd", "org", None)
POLICY = ChannelPolicySetting("vectoradd", ChannelPolicy.NONE, "org", WHEN)
NEW_USER = UserQuotas("bob", "Bob", 30, 30, 50, True, None)
STATS = Stats(
    None, 4, 2, 9, 6, 1, {"passed": 5, "timeout": 1}, {"H100": GpuStats(6, 1, 0, 2.5, None)}
)
PLAN = SyncPlan(
    (
        PlanItem(
            ProblemSpec("vectoradd", TASK, WHEN, ("H100",)),
            Action.UPDATE,
            (Change("deadline", "earlier → later"), Change("tests", "changed", True)),
            ("unknown GPU type T4 left out",),
        ),
    ),
    skipped=("broken: no task.yml",),
)

Read = Callable[[Any], object]
# Each answer the CLI reads, the record the service gave the server, and how the client
# makes that record of the answer.
RECORDS: list[tuple[ApiModel, object, Read]] = [
    (LeaderboardCreated.of(BOARD), BOARD, lambda m: m.to_record(TASK)),
    (
        RankingView.ranked(BOARD, {"H100": [ENTRY]}, {"H100": H100}),
        BOARD,
        lambda m: m.to_record(TASK),
    ),
    (RankingView.ranked(BOARD, {"H100": [ENTRY]}, {}), {"H100": [ENTRY]}, RankingView.entries),
    (
        LeaderboardListed.listed(BOARD, 5),
        LeaderboardSummary("vectoradd", WHEN, ("H100", "CPU"), 5, invite_only=True),
        LeaderboardListed.to_summary,
    ),
    (TaskFiles.of(TASK, {"a.py": "x = 1\n"}), {"a.py": "x = 1\n"}, lambda m: m.files),
    (TaskFiles.of(TASK, {}), sorted(TASK.templates), lambda m: m.templates),
    (SubmitAccepted.of(RECEIPT, QUEUE), RECEIPT, lambda m: m.receipt.to_record()),
    (SubmissionView.of(REPORT, QUEUE, {}, [PLACEMENT]), REPORT, SubmissionView.to_report),
    (
        SubmissionView.of(REPORT, None, {}, [PLACEMENT]),
        [PLACEMENT],
        SubmissionView.placement_records,
    ),
    (
        SubmissionView.of(REPORT, None, {"H100": "held for review"}),
        [],
        SubmissionView.placement_records,
    ),
    (QueuesView.of(QUEUES), QUEUES, QueuesView.to_record),
    (
        Joined(leaderboard="vectoradd", status="joined"),
        ("vectoradd", True),
        lambda m: (m.leaderboard, m.newly),
    ),
    (TeamView.of(TEAM), TEAM, TeamView.to_record),
    (TeamCode(leaderboard="vectoradd", code="team_abc"), "team_abc", lambda m: m.code),
    (TeamLeft(leaderboard="vectoradd", left="red"), "red", lambda m: m.left),
    (Stopped.of(PAUSE), PAUSE, Stopped.to_record),
    (PauseView.of(PAUSE), PAUSE, PauseView.to_record),
    (Started(leaderboard=None, was_paused=True), True, lambda m: m.was_paused),
    (Banned.of(BAN), BAN, Banned.to_record),
    (BanView.of(BAN), BAN, BanView.to_record),
    (UserDone(status="unbanned", user="mallory"), "unbanned", lambda m: m.status),
    (
        Rerun.of("vectoradd", [PUBLIC, SECRET]),
        [PUBLIC, SECRET],
        lambda m: [j.to_record() for j in m.queued],
    ),
    (AfterDeadlineRefusalView.of(REFUSAL), REFUSAL, AfterDeadlineRefusalView.to_record),
    (ChannelPolicySettingView.of(POLICY), POLICY, ChannelPolicySettingView.to_record),
    (
        Minted(leaderboard="vectoradd", max_uses=2, codes=["inv_a", "inv_b"]),
        ["inv_a", "inv_b"],
        lambda m: m.codes,
    ),
    (InviteView.of(INVITE), INVITE, InviteView.to_record),
    (InviteRevoked(status="revoked", code="inv_abc"), True, lambda m: m.revoked),
    (UserQuotasView.of(QUOTAS), QUOTAS, UserQuotasView.to_record),
    (UserQuotasView.of(NEW_USER), NEW_USER, UserQuotasView.to_record),
    (CustomQuotaView.of(CUSTOM), CUSTOM, CustomQuotaView.to_record),
    (StatsView.of(STATS), STATS, StatsView.to_record),
    (StatsView.of(Stats(WHEN, 0, 0, 0, 0, 0)), Stats(WHEN, 0, 0, 0, 0, 0), StatsView.to_record),
]
# Answers the CLI does not make records of: read back, they equal what was written all the same.
OTHERS: list[ApiModel] = [
    Detail(detail="no such leaderboard"),
    Health(database_ms=0.42, served_gpus=["CPU"]),
    SubmissionSummary.of(REPORT, {}),
    RunView.of(UNCOMPILED_RUN, None),
    SubmissionDone(status="deleted", id=11),
    LeaderboardDone(status="invite-only", leaderboard="vectoradd"),
    ChannelPolicySet(leaderboard="vectoradd", channel_policy=ChannelPolicy.ALL),
    AfterDeadlineSet(leaderboard="vectoradd", after_deadline_runs=False),
    TeamRulesSet(leaderboard="vectoradd", team_size=3, team_quotas=True),
    QuotaSet(user="alice", per_hour=5, daily=None),
    ProblemSetSync.of("spring", PLAN, "vectoradd: updated", applied=True, force=False),
]
ALL = [model for model, _, _ in RECORDS] + OTHERS


def wire(model: ApiModel) -> tuple[bytes, ApiModel]:
    """What the server sends (FastAPI writes a route's model with its TypeAdapter), and the
    model the client reads from it (`ApiClient` parses the JSON; `RemoteService` validates)."""
    body = TypeAdapter(type(model)).dump_json(model)
    return body, type(model).model_validate(json.loads(body))


@pytest.mark.parametrize("model", ALL, ids=lambda m: type(m).__name__)
def test_the_client_reads_back_what_the_server_wrote(model: ApiModel):
    body, read = wire(model)
    assert read == model
    assert TypeAdapter(type(model)).dump_json(read) == body


@pytest.mark.parametrize(
    ("model", "record", "read"), RECORDS, ids=[type(m).__name__ for m, _, _ in RECORDS]
)
def test_the_clients_records_equal_the_services(model: ApiModel, record: object, read: Read):
    assert read(wire(model)[1]) == record


def _walk(value: object) -> Iterator[BaseModel]:
    if isinstance(value, BaseModel):
        yield value
        for name in type(value).model_fields:
            yield from _walk(getattr(value, name))
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _walk(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _walk(item)


def _subclasses(cls: type[ApiModel]) -> Iterator[type[ApiModel]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_every_model_of_the_api_is_read_back_here():
    """A new model fails this until it has a case above (or is a field of one that has)."""
    for module in pkgutil.iter_modules(models_package.__path__):
        importlib.import_module(f"{models_package.__name__}.{module.name}")
    written = [found for model in ALL for found in _walk(model)]
    missing = [
        cls.__name__
        for cls in _subclasses(ApiModel)
        if not any(isinstance(found, cls) for found in written)
    ]
    assert missing == []


def test_what_stays_on_the_server_is_not_written():
    """A job's run, lease and tries, a leaderboard's creator and rate limit, a submitter's
    database key and a redacted run's result stay out of the JSON."""
    view = json.loads(wire(SubmissionView.of(REPORT, QUEUE, {}))[0])
    for job in view["jobs"]:
        assert not {"external_id", "attempts", "lease_owner"} & set(job)
    assert view["user_id"] == "alice"
    secret = next(run for run in view["runs"] if run["secret"])
    assert secret["held"] == HELD_RERUN
    assert not {"result", "diagnostics", "run_result", "speed_of_light"} & set(secret)
    board = json.loads(wire(LeaderboardCreated.of(BOARD))[0])
    assert not {"creator", "rate_limit_per_hour", "secret_seed"} & set(board)
    assert "placements" not in view  # only once a ranked submission is done


def test_times_and_left_out_fields_keep_their_old_form():
    """Times as `isoformat` writes them (popcorn-cli and older clients read that), a field
    with no value left out where the answer always left it out, null where it wrote null."""
    team = json.loads(wire(TeamView.of(TEAM))[0])
    assert team["created_at"] == "2026-03-04T05:06:07.891011+00:00"
    readable = json.loads(wire(SubmissionView.of(REPORT, None, {}))[0])["runs"][0]
    assert readable["result"]["check"] == "pass" and readable["result"]["benchmark-count"] == 3
    assert "held" not in readable and readable["start_time"] == WHEN.isoformat()
    assert readable["speed_of_light"][0]["bound"] == "memory"
    uncompiled = json.loads(wire(RunView.of(UNCOMPILED_RUN, None))[0])
    assert uncompiled["start_time"] is None and uncompiled["speed_of_light"] == []
    assert uncompiled["diagnostics"]["exit_code"] is None
    assert uncompiled["diagnostics"]["compilation"] == {
        "success": False,
        "stdout": "",
        "stderr": "error: expected ';'",
    }
    refusal = json.loads(wire(AfterDeadlineRefusalView.of(REFUSAL))[0])
    assert refusal == {"leaderboard": "vectoradd", "set_by": "org", "set_at": None}
