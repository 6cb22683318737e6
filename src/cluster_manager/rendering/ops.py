"""Readable text for organisers' and users' operational commands: stats, what is paused or
banned, the queue, a problem-set sync's plan. Each takes the JSON form the HTTP API answers,
so the CLI prints a server's answer and a database's alike."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from cluster_manager.core.records import ChannelPolicy
from cluster_manager.core.sync_plan import Action, SyncPlan
from cluster_manager.rendering.reports import counted, format_table


def format_stats(stats: dict[str, Any]) -> str:
    """`admin stats`: totals, runs by verdict, and per GPU the load and the queue waits (the
    JSON form the admin API answers, so the CLI prints a server's and a database's alike)."""
    period = f"since {_when(stats['since'])}" if stats["since"] else "all time"
    lines = [
        f"Stats ({period})",
        f"  {counted(stats['submissions'], 'submission')} from "
        f"{counted(stats['submitters'], 'user')} ({counted(stats['users'], 'user')} known)",
        f"  runs {stats['runs']}; jobs given up {stats['failed_jobs']}",
    ]
    if stats["verdicts"]:
        lines.append("  verdicts: " + ", ".join(f"{v} {n}" for v, n in stats["verdicts"].items()))
    rows = [
        (
            gpu,
            str(g["runs"]),
            str(g["queued"]),
            str(g["running"]),
            "-" if g["wait_p50_s"] is None else f"{g['wait_p50_s']:.1f} s",
            "-" if g["wait_p95_s"] is None else f"{g['wait_p95_s']:.1f} s",
        )
        for gpu, g in stats["gpus"].items()
    ]
    if rows:
        header = ("gpu", "runs", "queued", "running", "wait p50", "wait p95")
        lines += ["", format_table(header, rows)]
    return "\n".join(lines)


def _when(iso: str) -> str:
    """An API timestamp as a person reads it: to the minute, in UTC, no microseconds."""
    return f"{datetime.fromisoformat(iso).astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def format_controls(
    pauses: Sequence[dict[str, Any]],
    bans: Sequence[dict[str, Any]],
    quotas: Sequence[dict[str, Any]] = (),
    policies: Sequence[dict[str, Any]] = (),
    refusals: Sequence[dict[str, Any]] = (),
) -> str:
    """`admin status`: what is paused, who is banned, who has quotas of their own, which
    leaderboards' channels see other than the default (`ChannelPolicySetting.to_json`) and
    which take no runs after their deadline (`AfterDeadlineRefusal.to_json`)."""
    lines = []
    for pause in pauses:
        where = pause["leaderboard"] or "everywhere"
        lines.append(f"⏸ paused {where}: {pause['reason']} ({pause['paused_by']})")
    for ban in bans:
        who = f"{ban['user']} ({ban['name']})"
        lines.append(f"⛔ {who} banned: {ban['reason']} ({ban['banned_by']})")
    for quota in quotas:
        who = f"{quota['user']} ({quota['name']})"
        lines.append(f"🎚 {who} quotas: {format_custom_quota(quota)} ({quota['set_by']})")
    for policy in policies:
        seen = CHANNEL_SEES.get(policy["policy"], policy["policy"])
        lines.append(
            f"📣 {policy['leaderboard']}'s channel policy {policy['policy']}: {seen} "
            f"({policy['set_by']})"
        )
    for refusal in refusals:
        lines.append(
            f"⏰ {refusal['leaderboard']} takes no runs after its deadline ({refusal['set_by']})"
        )
    return "\n".join(lines) or "Submissions are open everywhere; nobody is banned."


# What each channel policy (`ChannelPolicy`'s values) shows the channel.
CHANNEL_SEES: dict[str, str] = {
    ChannelPolicy.RANKED: "a ranked submission's verdict and places",
    ChannelPolicy.NONE: "no submission",
    ChannelPolicy.ALL: "every submission's verdict",
}


def format_custom_quota(quota: dict[str, Any]) -> str:
    """An override's limits; what it leaves unset stays the deployment's."""
    hourly, daily = quota["per_hour"] or "default", quota["daily"] or "default"
    return f"per hour {hourly}, daily {daily}"


def format_user_quotas(quotas: dict[str, Any]) -> str:
    """`admin quota USER`: the limits that hold for the user now, each saying where it comes
    from (an admin's override, the deployment's, a young account's)."""
    custom = quotas["custom"] or {}
    hourly_from = "custom" if custom.get("per_hour") else "deployment's"
    daily_from = "custom" if custom.get("daily") else "deployment's"
    if quotas["new_account"]:
        daily_from = "a new account's"
    lines = [
        f"quotas of {quotas['user']} ({quotas['name']}):",
        f"  per hour per leaderboard: {quotas['per_hour']} test/benchmark, "
        f"{quotas['ranked_per_hour']} ranked ({hourly_from})",
        f"  daily, all leaderboards: {quotas['daily']} ({daily_from})",
    ]
    if custom:
        since = datetime.fromisoformat(custom["set_at"]).astimezone(UTC)
        lines.append(f"  custom since {since:%Y-%m-%d %H:%M} UTC, set by {custom['set_by']}")
    else:
        lines.append("  no quotas of their own: the deployment's apply")
    if not custom.get("per_hour"):
        lines.append("  (a leaderboard's own rate limit wins over the deployment's per hour)")
    return "\n".join(lines)


def format_queue(queue: dict[str, Any]) -> str:
    """`/queue` and `cluster-manager queue`: each GPU's line and whether a live scheduler
    runs it (a job on a type nothing runs fails after a minute), then the caller's own jobs."""
    rows = [
        (g["gpu"], str(g["queued"]), str(g["running"]), _served(g.get("served")))
        for g in queue["gpus"]
    ]
    header = ("gpu", "queued", "running", "served")
    lines = [format_table(header, rows)] if rows else ["No GPU types."]
    if unserved := [g["gpu"] for g in queue["gpus"] if g.get("served") is False]:
        lines.append(
            f"No scheduler runs {', '.join(unserved)}: jobs queued there fail after a minute."
        )
    if queue["mine"]:
        lines += ["", "Your jobs:"]
        for job in queue["mine"]:
            where = f"#{job['position']} in line" if job["position"] else job["state"]
            secret = " secret" if job["secret"] else ""
            lines.append(
                f"  submission {job['submission_id']} ({job['leaderboard']}) "
                f"[{job['gpu']}{secret}]: {where}"
            )
    return "\n".join(lines)


def _served(served: bool | None) -> str:
    # None: a server from before the queue said it.
    return "?" if served is None else "yes" if served else "no"


def format_sync_plan(plan: SyncPlan, *, applied: bool, force: bool) -> str:
    """One line per problem (created, updated, unchanged, or held for --force) with its
    changes and notes, then the problems skipped."""
    lines = []
    for item in plan.items:
        name = item.spec.name
        if item.action is Action.CREATE:
            verb = "created" if applied else "would create"
            lines.append(f"+ {name}: {verb} on {', '.join(item.spec.gpus)}")
        elif item.action is Action.UNCHANGED:
            lines.append(f"= {name}: unchanged")
        else:
            verb = "updated" if applied else "would update"
            if item.needs_force and not force:
                verb = "held: needs --force"
            lines.append(f"~ {name}: {verb}")
            for change in item.changes:
                mark = " (stored scores no longer compare)" if change.invalidates_scores else ""
                lines.append(f"    {change.what}: {change.detail}{mark}")
            if item.needs_force and (force or not applied):
                lines.append(
                    "    scores ranked so far were measured against the old task: consider "
                    "`admin invalidate` for those that no longer hold"
                )
        lines += [f"    note: {note}" for note in item.notes]
    lines += [f"- skipped {why}" for why in plan.skipped]
    if not plan.items and not plan.skipped:
        lines.append("the problem set lists no problems")
    return "\n".join(lines)
