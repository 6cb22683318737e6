"""The organisers' endpoints, for the admin token only (sent as `Authorization: Bearer`, as
popcorn-cli's `admin` commands send it): pausing and resuming submissions, bans, stats, any
submission read or purged."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Body, Depends, Request
from pydantic import StrictBool, StrictInt

from cluster_manager.api.auth import Caller, Private, caller
from cluster_manager.api.error_handlers import BadRequestError
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
    InviteRevoked,
    LeaderboardDone,
    SubmissionDone,
    UserDone,
)
from cluster_manager.api.models.leaderboard_admin import (
    AfterDeadlineRefusalView,
    AfterDeadlineSet,
    ChannelPolicySet,
    ChannelPolicySettingView,
    ProblemSetSync,
    Rerun,
    TeamRulesSet,
)
from cluster_manager.api.models.leaderboards import LeaderboardCreated
from cluster_manager.api.models.submissions import SubmissionView
from cluster_manager.api.routes.popcorn import service_of, submission_answer
from cluster_manager.api.uploads import read_upload
from cluster_manager.core.task import load_task_zip_bytes
from cluster_manager.core.task_sources import DEFAULT_LIMITS
from cluster_manager.rendering.ops import format_sync_plan
from cluster_manager.service import PermissionDeniedError, Submitter, parse_deadline
from cluster_manager.service.problem_sets import (
    find_problem_set,
    load_problem_set,
    unpack_problem_sets,
)

DEFAULT_PAUSE_REASON = "submissions are paused by the organisers"
API_ACTOR = "admin (API)"


async def admin_only(who: Annotated[Caller, Depends(caller)]) -> Caller:
    if not who.admin:
        raise PermissionDeniedError("this endpoint is for the admin token only")
    return who


# Everything the admin reads (codes, any submission in full, who is banned) is theirs alone.
router = APIRouter(prefix="/admin", dependencies=[Depends(admin_only), Private], tags=["admin"])
Admin = Annotated[Caller, Depends(admin_only)]


@router.post("/stop")
async def stop(
    request: Request,
    leaderboard: Annotated[str | None, Body(embed=True)] = None,
    reason: Annotated[str, Body(embed=True)] = DEFAULT_PAUSE_REASON,
) -> Stopped:
    """Pauses new submissions, everywhere or on one leaderboard; queued jobs still run."""
    pause = await service_of(request).controls.pause(leaderboard, reason, API_ACTOR)
    return Stopped.of(pause)


@router.post("/start")
async def start(
    request: Request, leaderboard: Annotated[str | None, Body(embed=True)] = None
) -> Started:
    resumed = await service_of(request).controls.resume(leaderboard)
    return Started(leaderboard=leaderboard, was_paused=resumed)


@router.get("/pauses")
async def pauses(request: Request) -> list[PauseView]:
    return [PauseView.of(p) for p in await service_of(request).controls.pauses()]


# A task zip: as large as Discord's `/leaderboard create` takes one.
MAX_TASK_UPLOAD = DEFAULT_LIMITS.total_bytes


@router.post("/leaderboards", status_code=201)
async def create_leaderboard(request: Request) -> LeaderboardCreated:
    """Creates a leaderboard from a task zip (multipart `file`, read as Discord's
    `/leaderboard create` reads one) and the fields `name`, `deadline` (ISO 8601, UTC without
    a zone), `gpus` (comma-separated), optionally `creator` and `rate_limit_per_hour`."""
    upload = await read_upload(request, MAX_TASK_UPLOAD, unpack=False, what="a task")
    fields = {k: v.strip() for k, v in upload.fields.items()}
    deadline = parse_deadline(fields.get("deadline", ""))
    gpus = [gpu.strip() for gpu in fields.get("gpus", "").split(",") if gpu.strip()]
    rate = fields.get("rate_limit_per_hour") or None
    if rate is not None and not rate.isdigit():
        raise BadRequestError(f"rate_limit_per_hour must be a whole number, got {rate!r}")
    creator = fields.get("creator") or None
    task = await asyncio.to_thread(load_task_zip_bytes, upload.data, upload.file_name)
    board = await service_of(request).leaderboards.create(
        fields.get("name", ""),
        task,
        deadline,
        gpus,
        creator=None if creator is None else Submitter(creator, creator),
        rate_limit_per_hour=None if rate is None else int(rate),
    )
    return LeaderboardCreated.of(board)


@router.delete("/leaderboards/{name}")
async def delete_leaderboard(name: str, request: Request) -> LeaderboardDone:
    """Deletes a leaderboard with all its submissions and results."""
    await service_of(request).leaderboards.delete(name)
    return LeaderboardDone(status="deleted", leaderboard=name)


@router.post("/leaderboards/{name}/close")
async def close(name: str, request: Request) -> LeaderboardDone:
    """Invite-only from now on: listed to and submittable by its members only."""
    await service_of(request).invites.set_closed(name, True)
    return LeaderboardDone(status="invite-only", leaderboard=name)


@router.post("/leaderboards/{name}/open")
async def open_(name: str, request: Request) -> LeaderboardDone:
    await service_of(request).invites.set_closed(name, False)
    return LeaderboardDone(status="open", leaderboard=name)


@router.put("/leaderboards/{name}/channel-policy")
async def channel_policy(
    name: str, request: Request, policy: Annotated[str, Body(embed=True)]
) -> ChannelPolicySet:
    """What the leaderboard's Discord channel sees of its submissions: `ranked` (a ranked
    submission's verdict and places), `none`, or `all` (every submission's verdict line)."""
    board = await service_of(request).controls.set_channel_policy(name, policy, API_ACTOR)
    return ChannelPolicySet(leaderboard=board.name, channel_policy=board.channel_policy)


@router.put("/leaderboards/{name}/after-deadline")
async def after_deadline(
    name: str, request: Request, allowed: Annotated[StrictBool, Body(embed=True)]
) -> AfterDeadlineSet:
    """Whether the leaderboard takes runs after its deadline (ranked on their own, never in
    the competition's ranking); `allowed` is a JSON true or false, nothing read as one."""
    board = await service_of(request).controls.set_after_deadline_runs(name, allowed, API_ACTOR)
    return AfterDeadlineSet(leaderboard=board.name, after_deadline_runs=board.after_deadline_runs)


@router.put("/leaderboards/{name}/teams")
async def team_rules(
    name: str,
    request: Request,
    size: Annotated[StrictInt | None, Body(embed=True)] = None,
    quotas: Annotated[StrictBool | None, Body(embed=True)] = None,
) -> TeamRulesSet:
    """The leaderboard's largest team (`size`) and whether its hourly quota counts a team's
    submissions together (`quotas`); null or left out keeps what is set. The rules now."""
    board = await service_of(request).teams.set_rules(name, size=size, quotas=quotas)
    return TeamRulesSet(
        leaderboard=board.name, team_size=board.team_size, team_quotas=board.team_quotas
    )


@router.get("/after-deadline-refusals")
async def after_deadline_refusals(request: Request) -> list[AfterDeadlineRefusalView]:
    """The leaderboards that take no runs after their deadline, with who set each."""
    found = await service_of(request).controls.after_deadline_refusals()
    return [AfterDeadlineRefusalView.of(r) for r in found]


@router.get("/channel-policies")
async def channel_policies(request: Request) -> list[ChannelPolicySettingView]:
    """The leaderboards whose channel policy is not the default, with who set each."""
    return [
        ChannelPolicySettingView.of(p)
        for p in await service_of(request).controls.channel_policies()
    ]


@router.post("/leaderboards/{name}/rerun")
async def rerun(
    name: str,
    request: Request,
    user: Annotated[str | None, Body(embed=True)] = None,
    submission_id: Annotated[int | None, Body(embed=True)] = None,
) -> Rerun:
    """Runs the ranked submissions again (after a task fix), behind everyone's own jobs."""
    jobs = await service_of(request).reruns.enqueue(name, user=user, submission_id=submission_id)
    return Rerun.of(name, jobs)


@router.post("/invites")
async def mint(
    request: Request,
    leaderboard: Annotated[str, Body(embed=True)],
    count: Annotated[int, Body(embed=True)] = 1,
    max_uses: Annotated[int, Body(embed=True)] = 1,
) -> Minted:
    """`count` codes for a leaderboard, each good for `max_uses` users."""
    codes = await service_of(request).invites.mint(leaderboard, count, max_uses, API_ACTOR)
    return Minted(leaderboard=leaderboard, max_uses=max_uses, codes=codes)


@router.get("/leaderboards/{name}/invites")
async def invites(name: str, request: Request) -> list[InviteView]:
    return [InviteView.of(i) for i in await service_of(request).invites.all(name)]


@router.delete("/invites/{code}")
async def revoke_invite(code: str, request: Request) -> InviteRevoked:
    revoked = await service_of(request).invites.revoke(code)
    return InviteRevoked(status="revoked" if revoked else "unknown or already revoked", code=code)


@router.get("/quotas")
async def quotas(request: Request) -> list[CustomQuotaView]:
    """Every user's quotas of their own (admins' overrides)."""
    return [CustomQuotaView.of(q) for q in await service_of(request).controls.custom_quotas()]


@router.get("/quotas/{user}")
async def quota(user: str, request: Request) -> UserQuotasView:
    """A user's quotas as they hold now, and the override behind them, if any."""
    return UserQuotasView.of(await service_of(request).controls.quota_of(user))


@router.put("/quotas/{user}")
async def set_quota(
    user: str,
    request: Request,
    per_hour: Annotated[int | None, Body(embed=True)] = None,
    daily: Annotated[int | None, Body(embed=True)] = None,
) -> QuotaSet:
    """Overrides a user's submissions per hour per leaderboard and/or per day."""
    await service_of(request).controls.set_quota(
        Submitter(user, user), per_hour=per_hour, daily=daily, actor=API_ACTOR
    )
    return QuotaSet(user=user, per_hour=per_hour, daily=daily)


@router.delete("/quotas/{user}")
async def clear_quota(user: str, request: Request) -> UserDone:
    cleared = await service_of(request).controls.clear_quota(user)
    return UserDone(status="cleared" if cleared else "had none", user=user)


MAX_PROBLEM_SET_UPLOAD = 32 * 1024 * 1024
TRUE = {"1", "true", "yes", "on"}


@router.post("/update-problems")
async def update_problems(request: Request) -> ProblemSetSync:
    """Syncs a problem set from an uploaded zip (a repository's archive as GitHub serves it):
    multipart `file`, `problem_set` (its competition file's name), `force`, `dry_run`. The
    same plan and rules as `leaderboard sync`; task files are read, never run."""
    upload = await read_upload(request, MAX_PROBLEM_SET_UPLOAD, unpack=False, what="a problem set")
    fields = upload.fields
    force, dry_run = (fields.get(k, "").strip().lower() in TRUE for k in ("force", "dry_run"))
    service = service_of(request)
    with tempfile.TemporaryDirectory(prefix="cm-problems-") as tmp:
        root = Path(tmp)
        await asyncio.to_thread(unpack_problem_sets, upload.data, root)
        path = find_problem_set(root, fields.get("problem_set", "").strip())
        unserved = await service.leaderboards.gpus_not_served()
        loaded = await asyncio.to_thread(load_problem_set, path, service.registry, unserved)
        plan = await service.problem_sets.sync(
            loaded.problems, skipped=loaded.skipped, apply=not dry_run, force=force
        )
    text = format_sync_plan(plan, applied=not dry_run, force=force)
    return ProblemSetSync.of(loaded.name, plan, text, applied=not dry_run, force=force)


@router.get("/stats")
async def stats(request: Request, last_day_only: bool = False) -> StatsView:
    return StatsView.of(await service_of(request).controls.stats(last_day=last_day_only))


@router.get("/bans")
async def bans(request: Request) -> list[BanView]:
    return [BanView.of(b) for b in await service_of(request).controls.bans()]


@router.put("/bans/{user}")
async def ban(
    user: str,
    request: Request,
    reason: Annotated[str, Body(embed=True)],
    name: Annotated[str | None, Body(embed=True)] = None,
    force: Annotated[bool, Body(embed=True)] = True,
) -> Banned:
    """Bans `user` (their id as the bot or CLI knows them): submissions refused, rankings
    hidden until unbanned. With `force` false, a user never seen here is refused (404)."""
    found = await service_of(request).controls.ban(
        Submitter(user, name or user), reason, API_ACTOR, known_only=not force
    )
    return Banned.of(found)


@router.delete("/bans/{user}")
async def unban(user: str, request: Request) -> UserDone:
    lifted = await service_of(request).controls.unban(user)
    return UserDone(status="unbanned" if lifted else "not banned", user=user)


@router.get("/submissions/{submission_id}")
async def submission(submission_id: int, request: Request, who: Admin) -> SubmissionView:
    return await submission_answer(service_of(request), submission_id, who)


@router.post("/submissions/{submission_id}/invalidate")
async def invalidate(
    submission_id: int, request: Request, reason: Annotated[str, Body(embed=True)]
) -> SubmissionDone:
    """Out of every ranking (kept, with the reason); its user is ranked again without it."""
    await service_of(request).controls.invalidate(submission_id, reason, API_ACTOR)
    return SubmissionDone(status="invalidated", id=submission_id)


@router.post("/submissions/{submission_id}/restore")
async def restore(submission_id: int, request: Request) -> SubmissionDone:
    await service_of(request).controls.restore(submission_id)
    return SubmissionDone(status="restored", id=submission_id)


@router.delete("/submissions/{submission_id}")
async def purge(submission_id: int, request: Request) -> SubmissionDone:
    """Deletes a finished submission for real; the rankings it held are computed again."""
    await service_of(request).history.delete(submission_id, None, admin=True)
    return SubmissionDone(status="deleted", id=submission_id)
