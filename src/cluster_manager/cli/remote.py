"""The CLI's commands when it is pointed at a server (CLUSTER_MANAGER_API_URL): the same
output and exit codes as on a database, through the HTTP API and the user's token."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from cluster_manager.cli.api_client import ApiClient, ApiError
from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.core.profiling import ProfileOptions, form_fields
from cluster_manager.core.records import JobEvent, LeaderboardSummary, Placement, RankingEntry
from cluster_manager.rendering.reports import (
    format_event,
    format_leaderboards,
    format_placement,
    format_ranking,
)
from cluster_manager.settings import Settings


def api_client(settings: Settings) -> ApiClient | None:
    """A client when the settings point at a server, else None (use the database)."""
    if settings.api_url is None:
        return None
    return ApiClient(settings.api_url, settings.api_token)


def list_boards(client: ApiClient) -> str:
    summaries = [
        LeaderboardSummary(
            b["name"],
            datetime.fromisoformat(b["deadline"]),
            tuple(b["gpu_types"]),
            b["submissions"],
            invite_only=bool(b.get("invite_only")),
        )
        for b in client.get("/leaderboards")
    ]
    return format_leaderboards(summaries, datetime.now(UTC))


def show_ranking(client: ApiClient, name: str, gpu: str | None, limit: int) -> str:
    board = client.get(f"/leaderboards/{name}", gpu=gpu, limit=limit)
    rankings = {
        gpu_name: [
            RankingEntry(
                e["rank"],
                e["user"],
                e["score"],
                e["submission_id"],
                datetime.fromisoformat(e["submission_time"]),
            )
            for e in entries
        ]
        for gpu_name, entries in board["rankings"].items()
    }
    return format_ranking(name, rankings)


def task_files(client: ApiClient, name: str) -> tuple[str, dict[str, str]]:
    task = client.get(f"/leaderboards/{name}/task")
    return task["description"], dict(task["files"])


def template(client: ApiClient, name: str, language: str) -> str:
    return client.text(f"/leaderboards/{name}/template/{language}")


def submit(
    client: ApiClient,
    leaderboard: str,
    file: Path,
    data: bytes,
    gpus: tuple[str, ...],
    mode: str,
    *,
    profile: ProfileOptions | None = None,
    wait: bool = True,
) -> bool:
    """Submits, follows the live events, prints the report; True when it passed (or, without
    `wait`, when it was accepted)."""
    if not client.has_token:
        raise ClusterManagerError(
            "CLUSTER_MANAGER_API_URL is set but CLUSTER_MANAGER_TOKEN is not: get a token with "
            "/token in Discord (or from an admin: cluster-manager user token NAME)"
        )
    gpu = _one_gpu(client, leaderboard, gpus)
    accepted = client.submit(leaderboard, gpu, mode, file.name, data, form_fields(profile))
    submission_id = accepted["details"]["id"]
    click.echo(f"submission {submission_id}: {file.name} to {leaderboard} ({mode} mode)", err=True)
    if not wait:
        return True
    for event, payload in client.events(submission_id):
        if event == "job":
            click.echo(format_event(JobEvent.from_json(payload)), err=True)
    details = client.get(f"/user/submissions/{submission_id}")
    click.echo(details["report"])
    for placement in details.get("placements", []):
        click.echo(format_placement(Placement(**placement)))
    return bool(details["job"]["status"] == "succeeded")


def _one_gpu(client: ApiClient, leaderboard: str, gpus: tuple[str, ...]) -> str:
    if len(gpus) > 1:
        raise ClusterManagerError("through the API a submission runs on one GPU: pass one --gpu")
    if gpus:
        return gpus[0]
    offered: list[str] = client.get(f"/gpus/{leaderboard}")
    if len(offered) != 1:
        raise ClusterManagerError(
            f"{leaderboard!r} runs on several GPUs; choose from {', '.join(offered)}"
        )
    return offered[0]


def write_files(files: dict[str, Any], out: Path) -> list[Path]:
    """Writes the task's files under `out`, refusing names that would leave it."""
    written = []
    root = out.resolve()
    for name, content in sorted(files.items()):
        target = (root / name).resolve()
        if not target.is_relative_to(root):
            raise ApiError(0, f"the server sent a file name that leaves {out}: {name!r}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        written.append(target)
    return written
