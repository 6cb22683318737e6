"""`RemoteService`: `service.port.ServicePort` over the HTTP API, for the CLI pointed at a
server (CLUSTER_MANAGER_API_URL). Its parts are named as `Service`'s, each method as that
part's; they answer with the records `Service` answers with: the API's JSON read by the
models the server writes it with (`api/models/`), each turned into its record. The server's
refusals come back as `ApiError`s carrying its words. What the API does not offer is refused
with `NotOverTheApiError`, never done on a database here instead. The organisers' parts are in
`remote_controls.py`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import NoReturn

from cluster_manager.api.models.answers import QueuesView
from cluster_manager.api.models.leaderboards import (
    LeaderboardCreated,
    LeaderboardListed,
    RankingView,
    TaskFiles,
)
from cluster_manager.api.models.submissions import SubmissionView, SubmitAccepted
from cluster_manager.api.models.teams import TeamCode, TeamLeft, TeamView
from cluster_manager.cli.api_client import ApiClient, ApiError
from cluster_manager.cli.api_client import segment as seg
from cluster_manager.cli.remote_controls import RemoteControls, RemoteInvites, RemoteReruns
from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.core.models import Mode, Task
from cluster_manager.core.profiling import ProfileOptions, form_fields
from cluster_manager.core.records import (
    JobEvent,
    Leaderboard,
    LeaderboardSummary,
    Placement,
    RankingEntry,
)
from cluster_manager.core.sync_plan import SyncPlan
from cluster_manager.core.task import load_task_zip_bytes
from cluster_manager.core.task_folder import folder_files, folder_zip
from cluster_manager.core.teams import Team
from cluster_manager.service import QueueView, SubmissionReceipt, SubmissionReport, Submitter
from cluster_manager.service.port import LeaderboardsPort, Row
from cluster_manager.service.sync import Problems

NO_USER_CREDENTIALS = (
    "CLUSTER_MANAGER_API_URL is set but CLUSTER_MANAGER_TOKEN is not: get a token with "
    "/token in Discord (or from an admin: cluster-manager user token NAME)"
)
ON_THE_DATABASE = (
    "unset CLUSTER_MANAGER_API_URL and run it where the server's database is (DATABASE_URL), "
    "or ask the server's admin"
)
TOKENS_REFUSED = (
    "`user token` works only on a database: the API issues no user's token (the admin token "
    f"acts for no user, and Discord users get theirs with /token); {ON_THE_DATABASE}"
)
EXPORT_REFUSED = (
    "`leaderboard export` reads the database, which the API does not serve whole; "
    f"{ON_THE_DATABASE}"
)
SYNC_REFUSED = (
    "`leaderboard sync` reads the problem set's folders on the machine that holds the database; "
    f"{ON_THE_DATABASE}, or upload the problem set as a zip to POST /admin/update-problems"
)


# How the server says that the caller is in no team (its 404 for a missing leaderboard differs).
NO_TEAM = "you are in no team on "


class NotOverTheApiError(ClusterManagerError):
    """An operation the HTTP API does not offer: its command works only on a database."""


def _refuse(message: str) -> NoReturn:
    raise NotOverTheApiError(message)


class RemoteService:
    """The parts over one API client. The caller is the token's: a `viewer` or `user` given
    is the one the token names (`--user` is refused before, by the CLI)."""

    def __init__(self, api: ApiClient) -> None:
        self.leaderboards = RemoteLeaderboards(api)
        self.problem_sets = RemoteProblemSets()
        self.exports = RemoteExports()
        self.submissions = RemoteSubmissions(api)
        self.events = RemoteEvents(api)
        self.queues = RemoteQueues(api)
        self.accounts = RemoteAccounts()
        self.controls = RemoteControls(api, self.leaderboards)
        self.reruns = RemoteReruns(api)
        self.invites = RemoteInvites(api)
        self.teams = RemoteTeams(api, self.leaderboards)


class RemoteLeaderboards:
    def __init__(self, api: ApiClient) -> None:
        self.api = api

    async def create(
        self,
        name: str,
        task: Task,
        deadline: datetime,
        gpus: Sequence[str],
        *,
        creator: Submitter | None = None,
        rate_limit_per_hour: int | None = None,
    ) -> Leaderboard:
        fields = {"name": name, "deadline": deadline.isoformat(), "gpus": ",".join(gpus)}
        if creator is not None:
            fields["creator"] = creator.external_id
        if rate_limit_per_hour is not None:
            fields["rate_limit_per_hour"] = str(rate_limit_per_hour)
        archive = folder_zip(folder_files(task))  # the task as Discord's create takes it
        view = await self.api.upload("/admin/leaderboards", f"{task.name}.zip", archive, fields)
        return LeaderboardCreated.model_validate(view).to_record(task)

    async def get(self, name: str) -> Leaderboard:
        view = await self.api.get(f"/leaderboards/{seg(name)}", limit=1)
        files = await self.task_files(name)
        task = await asyncio.to_thread(load_task_zip_bytes, folder_zip(files), f"{name}.zip")
        return RankingView.model_validate(view).to_record(task)

    async def all(
        self, viewer: Submitter | None = None, *, include_closed: bool = False
    ) -> list[LeaderboardSummary]:
        """What the token may see (the admin token: every leaderboard)."""
        listed = await self.api.get("/leaderboards")
        return [LeaderboardListed.model_validate(b).to_summary() for b in listed]

    async def ranking(
        self, name: str, gpu: str | None = None, *, limit: int = 100, after_deadline: bool = False
    ) -> dict[str, list[RankingEntry]]:
        # Sent only when asked for (None is left out of the query): an older server answers.
        flag = "true" if after_deadline else None
        view = await self.api.get(
            f"/leaderboards/{seg(name)}", gpu=gpu, limit=limit, after_deadline=flag
        )
        return RankingView.model_validate(view).entries()

    async def delete(self, name: str) -> None:
        await self.api.call("DELETE", f"/admin/leaderboards/{seg(name)}")

    async def task_files(self, name: str) -> dict[str, str]:
        view = await self.api.get(f"/leaderboards/{seg(name)}/task")
        return TaskFiles.model_validate(view).files

    async def templates(self, name: str) -> dict[str, str]:
        view = await self.api.get(f"/leaderboards/{seg(name)}/task")
        languages = TaskFiles.model_validate(view).templates
        return {
            language: await self.api.text(f"/leaderboards/{seg(name)}/template/{seg(language)}")
            for language in languages
        }

    async def gpus_not_served(self) -> dict[str, str]:
        _refuse(SYNC_REFUSED)


class RemoteProblemSets:
    async def sync(
        self,
        problems: Problems,
        *,
        skipped: Sequence[str] = (),
        apply: bool = True,
        force: bool = False,
    ) -> SyncPlan:
        _refuse(SYNC_REFUSED)


class RemoteExports:
    def rankings(self, name: str) -> AsyncIterator[list[Row]]:
        _refuse(EXPORT_REFUSED)

    def submissions(self, name: str) -> AsyncIterator[list[Row]]:
        _refuse(EXPORT_REFUSED)


class RemoteSubmissions:
    def __init__(self, api: ApiClient) -> None:
        self.api = api

    async def submit(
        self,
        leaderboard: str,
        user: Submitter,
        file_name: str,
        data: bytes,
        *,
        mode: Mode,
        gpus: Sequence[str] | None = None,
        profile: ProfileOptions | None = None,
    ) -> SubmissionReceipt:
        """Submits as the token's user, on one GPU (the API takes one per submission)."""
        if not self.api.has_token:
            raise ClusterManagerError(NO_USER_CREDENTIALS)
        gpu = await self._one_gpu(leaderboard, gpus or ())
        path = f"/submission/{seg(leaderboard)}/{seg(gpu)}/{mode.value}"
        answer = await self.api.upload(path, file_name, data, form_fields(profile))
        return SubmitAccepted.model_validate(answer).receipt.to_record()

    async def _one_gpu(self, leaderboard: str, gpus: Sequence[str]) -> str:
        if len(gpus) > 1:
            raise ClusterManagerError(
                "through the API a submission runs on one GPU: pass one --gpu"
            )
        if gpus:
            return gpus[0]
        offered: list[str] = await self.api.get(f"/gpus/{seg(leaderboard)}")
        if len(offered) != 1:
            raise ClusterManagerError(
                f"{leaderboard!r} runs on several GPUs; choose from {', '.join(offered)}"
            )
        return offered[0]

    async def report(self, submission_id: int) -> SubmissionReport:
        view = await self.api.get(f"/user/submissions/{seg(submission_id)}")
        return SubmissionView.model_validate(view).to_report()

    async def placements(self, submission_id: int) -> list[Placement]:
        view = await self.api.get(f"/user/submissions/{seg(submission_id)}")
        return SubmissionView.model_validate(view).placement_records()


class RemoteEvents:
    def __init__(self, api: ApiClient) -> None:
        self.api = api

    async def watch(self, *submission_ids: int) -> AsyncIterator[JobEvent]:
        for submission_id in submission_ids:
            async for event, payload in self.api.events(submission_id):
                if event == "job":
                    yield JobEvent.from_json(payload)


class RemoteQueues:
    def __init__(self, api: ApiClient) -> None:
        self.api = api

    async def view(self, user: Submitter | None = None) -> QueueView:
        return QueuesView.model_validate(await self.api.get("/queue")).to_record()


class RemoteAccounts:
    async def issue_token(self, user: Submitter) -> str:
        _refuse(TOKENS_REFUSED)

    async def revoke_token(self, external_id: str) -> bool:
        _refuse(TOKENS_REFUSED)


class RemoteTeams:
    def __init__(self, api: ApiClient, leaderboards: LeaderboardsPort) -> None:
        self.api = api
        self.leaderboards = leaderboards

    async def create(self, leaderboard: str, name: str, user: Submitter) -> Team:
        path = f"/leaderboards/{seg(leaderboard)}/teams"
        return TeamView.model_validate(
            await self.api.call("POST", path, {"name": name})
        ).to_record()

    async def invite(self, leaderboard: str, user: Submitter) -> str:
        path = f"/leaderboards/{seg(leaderboard)}/teams/mine/invites"
        return TeamCode.model_validate(await self.api.call("POST", path)).code

    async def join(self, code: str, user: Submitter) -> Team:
        answer = await self.api.call("POST", "/teams/join", {"code": code})
        return TeamView.model_validate(answer).to_record()

    async def leave(self, leaderboard: str, user: Submitter) -> str:
        path = f"/leaderboards/{seg(leaderboard)}/teams/mine"
        return TeamLeft.model_validate(await self.api.call("DELETE", path)).left

    async def of_user(self, leaderboard: str, user: Submitter) -> Team | None:
        try:
            found = await self.api.get(f"/leaderboards/{seg(leaderboard)}/teams/mine")
        except ApiError as exc:
            if exc.status == 404 and str(exc).startswith(NO_TEAM):
                return None
            raise
        return TeamView.model_validate(found).to_record()

    async def all(
        self, leaderboard: str, viewer: Submitter | None = None, *, include_closed: bool = False
    ) -> list[Team]:
        """What the token may see (the admin token: an invite-only board's too)."""
        found = await self.api.get(f"/leaderboards/{seg(leaderboard)}/teams")
        return [TeamView.model_validate(t).to_record() for t in found]

    async def set_rules(
        self, leaderboard: str, *, size: int | None = None, quotas: bool | None = None
    ) -> Leaderboard:
        """Through the admin API (a user's token is refused there with 403)."""
        body = {"size": size, "quotas": quotas}
        await self.api.call("PUT", f"/admin/leaderboards/{seg(leaderboard)}/teams", body)
        return await self.leaderboards.get(leaderboard)
