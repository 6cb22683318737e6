"""The organisers' endpoints, for the admin token only (sent as `Authorization: Bearer`, as
popcorn-cli's `admin` commands send it): pausing and resuming submissions, bans, stats, any
submission read or purged."""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Request
from pydantic import StrictBool, StrictInt

from cluster_manager.api import json_shapes
from cluster_manager.api.auth import Caller, caller
from cluster_manager.api.error_handlers import BadRequestError
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


router = APIRouter(prefix="/admin", dependencies=[Depends(admin_only)], tags=["admin"])
Admin = Annotated[Caller, Depends(admin_only)]


@router.post("/stop")
async def stop(
    request: Request,
    leaderboard: Annotated[str | None, Body(embed=True)] = None,
    reason: Annotated[str, Body(embed=True)] = DEFAULT_PAUSE_REASON,
) -> dict[str, Any]:
    """Pauses new submissions, everywhere or on one leaderboard; queued jobs still run."""
    pause = await service_of(request).controls.pause(leaderboard, reason, API_ACTOR)
    return {"status": "stopped", **pause.to_json()}


@router.post("/start")
async def start(
    request: Request, leaderboard: Annotated[str | None, Body(embed=True)] = None
) -> dict[str, Any]:
    resumed = await service_of(request).controls.resume(leaderboard)
    return {"status": "started", "leaderboard": leaderboard, "was_paused": resumed}


@router.get("/pauses")
async def pauses(request: Request) -> list[dict[str, Any]]:
    return [p.to_json() for p in await service_of(request).controls.pauses()]


# A task zip: as large as Discord's `/leaderboard create` takes one.
MAX_TASK_UPLOAD = DEFAULT_LIMITS.total_bytes


@router.post("/leaderboards", status_code=201)
async def create_leaderboard(request: Request) -> dict[str, Any]:
    """Creates a leaderboard from a task zip (multipart `file`, read as Discord's
    `/leaderboard create` reads one) and the fields `name`, `deadline` (ISO 8601, UTC without
    a zone), `gpus` (comma-separated), optionally `creator` and `rate_limit_per_hour`."""
    upload = await read_upload(request, MAX_TASK_UPLOAD, unpack=False)
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
    return {"status": "created", **json_shapes.leaderboard_view(board)}


@router.delete("/leaderboards/{name}")
async def delete_leaderboard(name: str, request: Request) -> dict[str, Any]:
    """Deletes a leaderboard with all its submissions and results."""
    await service_of(request).leaderboards.delete(name)
    return {"status": "deleted", "leaderboard": name}


@router.post("/leaderboards/{name}/close")
async def close(name: str, request: Request) -> dict[str, Any]:
    """Invite-only from now on: listed to and submittable by its members only."""
    await service_of(request).invites.set_closed(name, True)
    return {"status": "invite-only", "leaderboard": name}


@router.post("/leaderboards/{name}/open")
async def open_(name: str, request: Request) -> dict[str, Any]:
    await service_of(request).invites.set_closed(name, False)
    return {"status": "open", "leaderboard": name}


@router.put("/leaderboards/{name}/channel-policy")
async def channel_policy(
    name: str, request: Request, policy: Annotated[str, Body(embed=True)]
) -> dict[str, Any]:
    """What the leaderboard's Discord channel sees of its submissions: `ranked` (a ranked
    submission's verdict and places), `none`, or `all` (every submission's verdict line)."""
    board = await service_of(request).controls.set_channel_policy(name, policy, API_ACTOR)
    return {"leaderboard": board.name, "channel_policy": board.channel_policy.value}


@router.put("/leaderboards/{name}/after-deadline")
async def after_deadline(
    name: str, request: Request, allowed: Annotated[StrictBool, Body(embed=True)]
) -> dict[str, Any]:
    """Whether the leaderboard takes runs after its deadline (ranked on their own, never in
    the competition's ranking); `allowed` is a JSON true or false, nothing read as one."""
    board = await service_of(request).controls.set_after_deadline_runs(name, allowed, API_ACTOR)
    return {"leaderboard": board.name, "after_deadline_runs": board.after_deadline_runs}


@router.put("/leaderboards/{name}/teams")
async def team_rules(
    name: str,
    request: Request,
    size: Annotated[StrictInt | None, Body(embed=True)] = None,
    quotas: Annotated[StrictBool | None, Body(embed=True)] = None,
) -> dict[str, Any]:
    """The leaderboard's largest team (`size`) and whether its hourly quota counts a team's
    submissions together (`quotas`); null or left out keeps what is set. The rules now."""
    board = await service_of(request).teams.set_rules(name, size=size, quotas=quotas)
    return {
        "leaderboard": board.name,
        "team_size": board.team_size,
        "team_quotas": board.team_quotas,
    }


@router.get("/after-deadline-refusals")
async def after_deadline_refusals(request: Request) -> list[dict[str, Any]]:
    """The leaderboards that take no runs after their deadline, with who set each."""
    return [r.to_json() for r in await service_of(request).controls.after_deadline_refusals()]


@router.get("/channel-policies")
async def channel_policies(request: Request) -> list[dict[str, Any]]:
    """The leaderboards whose channel policy is not the default, with who set each."""
    return [p.to_json() for p in await service_of(request).controls.channel_policies()]


@router.post("/leaderboards/{name}/rerun")
async def rerun(
    name: str,
    request: Request,
    user: Annotated[str | None, Body(embed=True)] = None,
    submission_id: Annotated[int | None, Body(embed=True)] = None,
) -> dict[str, Any]:
    """Runs the ranked submissions again (after a task fix), behind everyone's own jobs."""
    jobs = await service_of(request).reruns.enqueue(name, user=user, submission_id=submission_id)
    return {
        "status": "queued",
        "leaderboard": name,
        "submissions": sorted({j.submission_id for j in jobs}),
        "jobs": len(jobs),
        "queued": [json_shapes.job_view(j) for j in jobs],
    }


@router.post("/invites")
async def mint(
    request: Request,
    leaderboard: Annotated[str, Body(embed=True)],
    count: Annotated[int, Body(embed=True)] = 1,
    max_uses: Annotated[int, Body(embed=True)] = 1,
) -> dict[str, Any]:
    """`count` codes for a leaderboard, each good for `max_uses` users."""
    codes = await service_of(request).invites.mint(leaderboard, count, max_uses, API_ACTOR)
    return {"leaderboard": leaderboard, "max_uses": max_uses, "codes": codes}


@router.get("/leaderboards/{name}/invites")
async def invites(name: str, request: Request) -> list[dict[str, Any]]:
    return [i.to_json() for i in await service_of(request).invites.all(name)]


@router.delete("/invites/{code}")
async def revoke_invite(code: str, request: Request) -> dict[str, Any]:
    revoked = await service_of(request).invites.revoke(code)
    return {"status": "revoked" if revoked else "unknown or already revoked", "code": code}


@router.get("/quotas")
async def quotas(request: Request) -> list[dict[str, Any]]:
    """Every user's quotas of their own (admins' overrides)."""
    return [q.to_json() for q in await service_of(request).controls.custom_quotas()]


@router.get("/quotas/{user}")
async def quota(user: str, request: Request) -> dict[str, Any]:
    """A user's quotas as they hold now, and the override behind them, if any."""
    return (await service_of(request).controls.quota_of(user)).to_json()


@router.put("/quotas/{user}")
async def set_quota(
    user: str,
    request: Request,
    per_hour: Annotated[int | None, Body(embed=True)] = None,
    daily: Annotated[int | None, Body(embed=True)] = None,
) -> dict[str, Any]:
    """Overrides a user's submissions per hour per leaderboard and/or per day."""
    await service_of(request).controls.set_quota(
        Submitter(user, user), per_hour=per_hour, daily=daily, actor=API_ACTOR
    )
    return {"status": "set", "user": user, "per_hour": per_hour, "daily": daily}


@router.delete("/quotas/{user}")
async def clear_quota(user: str, request: Request) -> dict[str, Any]:
    cleared = await service_of(request).controls.clear_quota(user)
    return {"status": "cleared" if cleared else "had none", "user": user}


MAX_PROBLEM_SET_UPLOAD = 32 * 1024 * 1024
TRUE = {"1", "true", "yes", "on"}


@router.post("/update-problems")
async def update_problems(request: Request) -> dict[str, Any]:
    """Syncs a problem set from an uploaded zip (a repository's archive as GitHub serves it):
    multipart `file`, `problem_set` (its competition file's name), `force`, `dry_run`. The
    same plan and rules as `leaderboard sync`; task files are read, never run."""
    upload = await read_upload(request, MAX_PROBLEM_SET_UPLOAD, unpack=False)
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
    return {
        "problem_set": loaded.name,
        "applied": not dry_run,
        "held": [item.spec.name for item in plan.held(force)] if not dry_run else [],
        "items": [
            {
                "name": item.spec.name,
                "action": item.action.value,
                "needs_force": item.needs_force,
                "changes": [asdict(c) for c in item.changes],
                "notes": list(item.notes),
            }
            for item in plan.items
        ],
        "skipped": list(plan.skipped),
        "text": format_sync_plan(plan, applied=not dry_run, force=force),
    }


@router.get("/stats")
async def stats(request: Request, last_day_only: bool = False) -> dict[str, Any]:
    return (await service_of(request).controls.stats(last_day=last_day_only)).to_json()


@router.get("/bans")
async def bans(request: Request) -> list[dict[str, Any]]:
    return [b.to_json() for b in await service_of(request).controls.bans()]


@router.put("/bans/{user}")
async def ban(
    user: str,
    request: Request,
    reason: Annotated[str, Body(embed=True)],
    name: Annotated[str | None, Body(embed=True)] = None,
    force: Annotated[bool, Body(embed=True)] = True,
) -> dict[str, Any]:
    """Bans `user` (their id as the bot or CLI knows them): submissions refused, rankings
    hidden until unbanned. With `force` false, a user never seen here is refused (404)."""
    found = await service_of(request).controls.ban(
        Submitter(user, name or user), reason, API_ACTOR, known_only=not force
    )
    return {"status": "banned", **found.to_json()}


@router.delete("/bans/{user}")
async def unban(user: str, request: Request) -> dict[str, Any]:
    lifted = await service_of(request).controls.unban(user)
    return {"status": "unbanned" if lifted else "not banned", "user": user}


@router.get("/submissions/{submission_id}")
async def submission(submission_id: int, request: Request, who: Admin) -> Any:
    return await submission_answer(service_of(request), submission_id, who)


@router.post("/submissions/{submission_id}/invalidate")
async def invalidate(
    submission_id: int, request: Request, reason: Annotated[str, Body(embed=True)]
) -> dict[str, Any]:
    """Out of every ranking (kept, with the reason); its user is ranked again without it."""
    await service_of(request).controls.invalidate(submission_id, reason, API_ACTOR)
    return {"status": "invalidated", "id": submission_id}


@router.post("/submissions/{submission_id}/restore")
async def restore(submission_id: int, request: Request) -> dict[str, Any]:
    await service_of(request).controls.restore(submission_id)
    return {"status": "restored", "id": submission_id}


@router.delete("/submissions/{submission_id}")
async def purge(submission_id: int, request: Request) -> dict[str, Any]:
    """Deletes a finished submission for real; the rankings it held are computed again."""
    await service_of(request).history.delete(submission_id, None, admin=True)
    return {"status": "deleted", "id": submission_id}
