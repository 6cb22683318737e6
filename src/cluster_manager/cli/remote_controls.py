"""The organisers' parts of `RemoteService`: `service.port`'s `ControlsPort`, `RerunsPort`
and `InvitesPort` over the admin API (`/admin/...`, for the admin token only; a user's token
is refused there with 403), but for joining with a code, which any user does."""

from __future__ import annotations

from cluster_manager.api.models.admin import (
    Banned,
    BanView,
    CustomQuotaView,
    InviteView,
    Minted,
    PauseView,
    Started,
    StatsView,
    Stopped,
    UserQuotasView,
)
from cluster_manager.api.models.answers import InviteRevoked, Joined, UserDone
from cluster_manager.api.models.leaderboard_admin import (
    AfterDeadlineRefusalView,
    ChannelPolicySettingView,
    Rerun,
)
from cluster_manager.cli.api_client import ApiClient, ApiError
from cluster_manager.cli.api_client import segment as seg
from cluster_manager.core.records import ChannelPolicy, Job, Leaderboard
from cluster_manager.service import Submitter, UnknownUserError
from cluster_manager.service.port import (
    AfterDeadlineRefusal,
    Ban,
    ChannelPolicySetting,
    CustomQuota,
    Invite,
    LeaderboardsPort,
    Pause,
    Stats,
    UserQuotas,
)


class RemoteControls:
    """Each method as `Service.controls`' of the same name. The server records its own actor
    (the admin API's), whatever `actor` says."""

    def __init__(self, api: ApiClient, leaderboards: LeaderboardsPort) -> None:
        self.api = api
        self.leaderboards = leaderboards

    async def pause(self, leaderboard: str | None, reason: str, actor: str) -> Pause:
        body = {"leaderboard": leaderboard, "reason": reason}
        answer = await self.api.call("POST", "/admin/stop", body)
        return Stopped.model_validate(answer).to_record()

    async def resume(self, leaderboard: str | None) -> bool:
        answer = await self.api.call("POST", "/admin/start", {"leaderboard": leaderboard})
        return Started.model_validate(answer).was_paused

    async def pauses(self) -> list[Pause]:
        return [
            PauseView.model_validate(p).to_record() for p in await self.api.get("/admin/pauses")
        ]

    async def ban(
        self, user: Submitter, reason: str, actor: str, *, known_only: bool = False
    ) -> Ban:
        body = {"reason": reason, "name": user.name, "force": not known_only}
        try:
            answer = await self.api.call("PUT", f"/admin/bans/{seg(user.external_id)}", body)
        except ApiError as exc:
            if exc.status == 404:  # the service's UnknownUserError, as the API answers it
                raise UnknownUserError(str(exc)) from None
            raise
        return Banned.model_validate(answer).to_record()

    async def unban(self, external_id: str) -> bool:
        answer = await self.api.call("DELETE", f"/admin/bans/{seg(external_id)}")
        return UserDone.model_validate(answer).status == "unbanned"

    async def bans(self) -> list[Ban]:
        return [BanView.model_validate(b).to_record() for b in await self.api.get("/admin/bans")]

    async def invalidate(self, submission_id: int, reason: str, actor: str) -> None:
        path = f"/admin/submissions/{seg(submission_id)}/invalidate"
        await self.api.call("POST", path, {"reason": reason})

    async def restore(self, submission_id: int) -> None:
        await self.api.call("POST", f"/admin/submissions/{seg(submission_id)}/restore")

    async def after_deadline_refusals(self) -> list[AfterDeadlineRefusal]:
        found = await self.api.get("/admin/after-deadline-refusals")
        return [AfterDeadlineRefusalView.model_validate(r).to_record() for r in found]

    async def channel_policies(self) -> list[ChannelPolicySetting]:
        found = await self.api.get("/admin/channel-policies")
        return [ChannelPolicySettingView.model_validate(p).to_record() for p in found]

    async def set_quota(
        self, user: Submitter, *, per_hour: int | None, daily: int | None, actor: str
    ) -> None:
        body = {"per_hour": per_hour, "daily": daily}
        await self.api.call("PUT", f"/admin/quotas/{seg(user.external_id)}", body)

    async def clear_quota(self, external_id: str) -> bool:
        answer = await self.api.call("DELETE", f"/admin/quotas/{seg(external_id)}")
        return UserDone.model_validate(answer).status == "cleared"

    async def quota_of(self, external_id: str) -> UserQuotas:
        answer = await self.api.get(f"/admin/quotas/{seg(external_id)}")
        return UserQuotasView.model_validate(answer).to_record()

    async def custom_quotas(self) -> list[CustomQuota]:
        return [
            CustomQuotaView.model_validate(q).to_record()
            for q in await self.api.get("/admin/quotas")
        ]

    async def stats(self, *, last_day: bool = False) -> Stats:
        answer = await self.api.get("/admin/stats", last_day_only=str(last_day).lower())
        return StatsView.model_validate(answer).to_record()

    async def set_channel_policy(
        self, name: str, policy: ChannelPolicy | str, actor: str
    ) -> Leaderboard:
        value = policy.value if isinstance(policy, ChannelPolicy) else policy
        path = f"/admin/leaderboards/{seg(name)}/channel-policy"
        await self.api.call("PUT", path, {"policy": value})
        return await self.leaderboards.get(name)

    async def set_after_deadline_runs(self, name: str, allowed: bool, actor: str) -> Leaderboard:
        path = f"/admin/leaderboards/{seg(name)}/after-deadline"
        await self.api.call("PUT", path, {"allowed": allowed})
        return await self.leaderboards.get(name)


class RemoteReruns:
    def __init__(self, api: ApiClient) -> None:
        self.api = api

    async def enqueue(
        self, leaderboard: str, *, user: str | None = None, submission_id: int | None = None
    ) -> list[Job]:
        body = {"user": user, "submission_id": submission_id}
        answer = await self.api.call("POST", f"/admin/leaderboards/{seg(leaderboard)}/rerun", body)
        return [j.to_record() for j in Rerun.model_validate(answer).queued]


class RemoteInvites:
    def __init__(self, api: ApiClient) -> None:
        self.api = api

    async def set_closed(self, name: str, closed: bool) -> None:
        action = "close" if closed else "open"
        await self.api.call("POST", f"/admin/leaderboards/{seg(name)}/{action}")

    async def mint(self, name: str, count: int, max_uses: int, actor: str) -> list[str]:
        body = {"leaderboard": name, "count": count, "max_uses": max_uses}
        return Minted.model_validate(await self.api.call("POST", "/admin/invites", body)).codes

    async def all(self, name: str) -> list[Invite]:
        found = await self.api.get(f"/admin/leaderboards/{seg(name)}/invites")
        return [InviteView.model_validate(i).to_record() for i in found]

    async def revoke(self, code: str) -> bool:
        answer = await self.api.call("DELETE", f"/admin/invites/{seg(code)}")
        return InviteRevoked.model_validate(answer).revoked

    async def join(self, code: str, user: Submitter) -> tuple[str, bool]:
        answer = Joined.model_validate(await self.api.call("POST", "/user/join", {"code": code}))
        return answer.leaderboard, answer.newly
