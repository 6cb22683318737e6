"""`ServicePort`: the operations of `Service` that the command line calls, as a protocol.

Two things satisfy it: `Service` itself (on a database) and the CLI's client of the HTTP API
(`cli/remote_service.py`, through a server). A command's body is written once against this
port and runs the same either way. Each method is named and typed as `Service` has it; a
method here is only what the CLI passes (the service's other options keep their defaults).

The records the port answers with are re-exported here, so that a front end finds them
without reaching into storage.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any, Protocol

from cluster_manager.core.models import Mode, Task
from cluster_manager.core.profiling import ProfileOptions
from cluster_manager.core.records import (
    ChannelPolicy,
    Job,
    JobEvent,
    Leaderboard,
    LeaderboardSummary,
    Placement,
    RankingEntry,
)
from cluster_manager.core.sync_plan import SyncPlan
from cluster_manager.core.teams import Team as Team
from cluster_manager.service.quotas import UserQuotas as UserQuotas
from cluster_manager.service.receipts import (
    QueueView,
    SubmissionReceipt,
    SubmissionReport,
    Submitter,
)
from cluster_manager.service.sync import Problems
from cluster_manager.storage.controls import Ban as Ban
from cluster_manager.storage.controls import Pause as Pause
from cluster_manager.storage.invites import Invite as Invite
from cluster_manager.storage.leaderboards import AfterDeadlineRefusal as AfterDeadlineRefusal
from cluster_manager.storage.leaderboards import ChannelPolicySetting as ChannelPolicySetting
from cluster_manager.storage.queue import GpuQueue as GpuQueue
from cluster_manager.storage.queue import OpenJob as OpenJob
from cluster_manager.storage.quotas import CustomQuota as CustomQuota
from cluster_manager.storage.stats import GpuStats as GpuStats
from cluster_manager.storage.stats import Stats as Stats
from cluster_manager.storage.submissions import StoredSubmission as StoredSubmission

# A page of an export: one row per ranking entry or submission.
Row = dict[str, Any]


class LeaderboardPort(Protocol):
    async def create_leaderboard(
        self,
        name: str,
        task: Task,
        deadline: datetime,
        gpus: Sequence[str],
        *,
        creator: Submitter | None = None,
        rate_limit_per_hour: int | None = None,
    ) -> Leaderboard: ...

    async def leaderboard(self, name: str) -> Leaderboard: ...

    async def list_leaderboards(
        self, viewer: Submitter | None = None, *, include_closed: bool = False
    ) -> list[LeaderboardSummary]: ...

    async def ranking(
        self, name: str, gpu: str | None = None, *, limit: int = 100, after_deadline: bool = False
    ) -> dict[str, list[RankingEntry]]: ...

    async def delete_leaderboard(self, name: str) -> None: ...

    async def task_files(self, name: str) -> dict[str, str]: ...

    async def templates(self, name: str) -> dict[str, str]: ...

    def export_rankings(self, name: str) -> AsyncIterator[list[Row]]: ...

    def export_submissions(self, name: str) -> AsyncIterator[list[Row]]: ...

    async def gpus_not_served(self) -> dict[str, str]: ...

    async def sync_problem_set(
        self,
        problems: Problems,
        *,
        skipped: Sequence[str] = (),
        apply: bool = True,
        force: bool = False,
    ) -> SyncPlan: ...


class SubmissionPort(Protocol):
    async def submit(
        self,
        leaderboard: str,
        user: Submitter,
        file_name: str,
        data: bytes,
        *,
        gpus: Sequence[str] | None = None,
        mode: Mode = Mode.LEADERBOARD,
        profile: ProfileOptions | None = None,
    ) -> SubmissionReceipt: ...

    def watch(self, *submission_ids: int) -> AsyncIterator[JobEvent]: ...

    async def report(self, submission_id: int) -> SubmissionReport: ...

    async def placements(self, submission_id: int) -> list[Placement]: ...

    async def queues(self, user: Submitter | None = None) -> QueueView: ...

    async def join(self, code: str, user: Submitter) -> tuple[str, bool]: ...

    async def issue_token(self, user: Submitter) -> str: ...

    async def revoke_token(self, external_id: str) -> bool: ...


class ControlPort(Protocol):
    """Organisers' controls (`admin ...`)."""

    async def pause_submissions(
        self, leaderboard: str | None, reason: str, actor: str
    ) -> Pause: ...

    async def resume_submissions(self, leaderboard: str | None) -> bool: ...

    async def pauses(self) -> list[Pause]: ...

    async def ban_user(
        self, user: Submitter, reason: str, actor: str, *, known_only: bool = False
    ) -> Ban: ...

    async def unban_user(self, external_id: str) -> bool: ...

    async def bans(self) -> list[Ban]: ...

    async def invalidate_submission(self, submission_id: int, reason: str, actor: str) -> None: ...

    async def restore_submission(self, submission_id: int) -> None: ...

    async def rerun(
        self, leaderboard: str, *, user: str | None = None, submission_id: int | None = None
    ) -> list[Job]: ...

    async def set_closed(self, name: str, closed: bool) -> None: ...

    async def set_channel_policy(
        self, name: str, policy: ChannelPolicy | str, actor: str
    ) -> Leaderboard: ...

    async def channel_policies(self) -> list[ChannelPolicySetting]: ...

    async def after_deadline_refusals(self) -> list[AfterDeadlineRefusal]: ...

    async def set_after_deadline_runs(
        self, name: str, allowed: bool, actor: str
    ) -> Leaderboard: ...

    async def mint_invites(self, name: str, count: int, max_uses: int, actor: str) -> list[str]: ...

    async def invites(self, name: str) -> list[Invite]: ...

    async def revoke_invite(self, code: str) -> bool: ...

    async def set_quota(
        self, user: Submitter, *, per_hour: int | None, daily: int | None, actor: str
    ) -> None: ...

    async def clear_quota(self, external_id: str) -> bool: ...

    async def quota_of(self, external_id: str) -> UserQuotas: ...

    async def custom_quotas(self) -> list[CustomQuota]: ...

    async def stats(self, *, last_day: bool = False) -> Stats: ...


class TeamPort(Protocol):
    async def create_team(self, leaderboard: str, name: str, user: Submitter) -> Team: ...

    async def team_invite(self, leaderboard: str, user: Submitter) -> str: ...

    async def join_team(self, code: str, user: Submitter) -> Team: ...

    async def leave_team(self, leaderboard: str, user: Submitter) -> str: ...

    async def team_of(self, leaderboard: str, user: Submitter) -> Team | None: ...

    async def teams(
        self, leaderboard: str, viewer: Submitter | None = None, *, include_closed: bool = False
    ) -> list[Team]: ...

    async def set_team_rules(
        self, leaderboard: str, *, size: int | None = None, quotas: bool | None = None
    ) -> Leaderboard: ...


class ServicePort(LeaderboardPort, SubmissionPort, ControlPort, TeamPort, Protocol):
    """Everything the command line asks of the service."""
