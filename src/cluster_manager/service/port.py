"""`ServicePort`: the parts of `Service` that the command line calls, as protocols.

Two things satisfy it: `Service` itself (on a database) and the CLI's client of the HTTP API
(`cli/remote_service.py`, through a server). A command's body is written once against this
port and runs the same either way: `port.leaderboards.create(...)`. Each part here has the
name `Service` gives it, and each of its methods is named and typed as that part has it; a
method here takes only what the CLI passes (the service's other options keep their defaults).

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


class LeaderboardsPort(Protocol):
    async def create(
        self,
        name: str,
        task: Task,
        deadline: datetime,
        gpus: Sequence[str],
        *,
        creator: Submitter | None = None,
        rate_limit_per_hour: int | None = None,
    ) -> Leaderboard: ...

    async def get(self, name: str) -> Leaderboard: ...

    async def all(
        self, viewer: Submitter | None = None, *, include_closed: bool = False
    ) -> list[LeaderboardSummary]: ...

    async def ranking(
        self, name: str, gpu: str | None = None, *, limit: int = 100, after_deadline: bool = False
    ) -> dict[str, list[RankingEntry]]: ...

    async def delete(self, name: str) -> None: ...

    async def task_files(self, name: str) -> dict[str, str]: ...

    async def templates(self, name: str) -> dict[str, str]: ...

    async def gpus_not_served(self) -> dict[str, str]: ...


class ProblemSetsPort(Protocol):
    async def sync(
        self,
        problems: Problems,
        *,
        skipped: Sequence[str] = (),
        apply: bool = True,
        force: bool = False,
    ) -> SyncPlan: ...


class ExportsPort(Protocol):
    def rankings(self, name: str) -> AsyncIterator[list[Row]]: ...

    def submissions(self, name: str) -> AsyncIterator[list[Row]]: ...


class SubmissionsPort(Protocol):
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
    ) -> SubmissionReceipt: ...

    async def report(self, submission_id: int) -> SubmissionReport: ...

    async def placements(self, submission_id: int) -> list[Placement]: ...


class EventsPort(Protocol):
    def watch(self, *submission_ids: int) -> AsyncIterator[JobEvent]: ...


class QueuesPort(Protocol):
    async def view(self, user: Submitter | None = None) -> QueueView: ...


class AccountsPort(Protocol):
    async def issue_token(self, user: Submitter) -> str: ...

    async def revoke_token(self, external_id: str) -> bool: ...


class ControlsPort(Protocol):
    """Organisers' controls (`admin ...`)."""

    async def pause(self, leaderboard: str | None, reason: str, actor: str) -> Pause: ...

    async def resume(self, leaderboard: str | None) -> bool: ...

    async def pauses(self) -> list[Pause]: ...

    async def ban(
        self, user: Submitter, reason: str, actor: str, *, known_only: bool = False
    ) -> Ban: ...

    async def unban(self, external_id: str) -> bool: ...

    async def bans(self) -> list[Ban]: ...

    async def invalidate(self, submission_id: int, reason: str, actor: str) -> None: ...

    async def restore(self, submission_id: int) -> None: ...

    async def set_channel_policy(
        self, name: str, policy: ChannelPolicy | str, actor: str
    ) -> Leaderboard: ...

    async def channel_policies(self) -> list[ChannelPolicySetting]: ...

    async def after_deadline_refusals(self) -> list[AfterDeadlineRefusal]: ...

    async def set_after_deadline_runs(
        self, name: str, allowed: bool, actor: str
    ) -> Leaderboard: ...

    async def set_quota(
        self, user: Submitter, *, per_hour: int | None, daily: int | None, actor: str
    ) -> None: ...

    async def clear_quota(self, external_id: str) -> bool: ...

    async def quota_of(self, external_id: str) -> UserQuotas: ...

    async def custom_quotas(self) -> list[CustomQuota]: ...

    async def stats(self, *, last_day: bool = False) -> Stats: ...


class RerunsPort(Protocol):
    async def enqueue(
        self, leaderboard: str, *, user: str | None = None, submission_id: int | None = None
    ) -> list[Job]: ...


class InvitesPort(Protocol):
    async def set_closed(self, name: str, closed: bool) -> None: ...

    async def mint(self, name: str, count: int, max_uses: int, actor: str) -> list[str]: ...

    async def all(self, name: str) -> list[Invite]: ...

    async def revoke(self, code: str) -> bool: ...

    async def join(self, code: str, user: Submitter) -> tuple[str, bool]: ...


class TeamsPort(Protocol):
    async def create(self, leaderboard: str, name: str, user: Submitter) -> Team: ...

    async def invite(self, leaderboard: str, user: Submitter) -> str: ...

    async def join(self, code: str, user: Submitter) -> Team: ...

    async def leave(self, leaderboard: str, user: Submitter) -> str: ...

    async def of_user(self, leaderboard: str, user: Submitter) -> Team | None: ...

    async def all(
        self, leaderboard: str, viewer: Submitter | None = None, *, include_closed: bool = False
    ) -> list[Team]: ...

    async def set_rules(
        self, leaderboard: str, *, size: int | None = None, quotas: bool | None = None
    ) -> Leaderboard: ...


class ServicePort(Protocol):
    """Everything the command line asks of the service, part by part (read-only: a part is
    an implementation's own)."""

    @property
    def leaderboards(self) -> LeaderboardsPort: ...

    @property
    def problem_sets(self) -> ProblemSetsPort: ...

    @property
    def exports(self) -> ExportsPort: ...

    @property
    def submissions(self) -> SubmissionsPort: ...

    @property
    def events(self) -> EventsPort: ...

    @property
    def queues(self) -> QueuesPort: ...

    @property
    def accounts(self) -> AccountsPort: ...

    @property
    def controls(self) -> ControlsPort: ...

    @property
    def reruns(self) -> RerunsPort: ...

    @property
    def invites(self) -> InvitesPort: ...

    @property
    def teams(self) -> TeamsPort: ...
