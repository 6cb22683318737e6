"""The organisers' half of `RemoteService`: `service.port.ControlPort` over the admin API
(`/admin/...`, for the admin token only; a user's token is refused there with 403)."""

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
from cluster_manager.api.models.answers import InviteRevoked, UserDone
from cluster_manager.api.models.leaderboard_admin import (
    AfterDeadlineRefusalView,
    ChannelPolicySettingView,
    Rerun,
)
from cluster_manager.cli.api_client import ApiClient, ApiError
from cluster_manager.cli.api_client import segment as seg
from cluster_manager.core.records import Job
from cluster_manager.service import Submitter, UnknownUserError
from cluster_manager.service.port import (
    AfterDeadlineRefusal,
    Ban,
    ChannelPolicySetting,
    CustomQuota,
    Invite,
    Pause,
    Stats,
    UserQuotas,
)


class RemoteControls:
    """Each method as `Service`'s of the same name. The server records its own actor (the
    admin API's), whatever `actor` says."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api

    async def pause_submissions(self, leaderboard: str | None, reason: str, actor: str) -> Pause:
        body = {"leaderboard": leaderboard, "reason": reason}
        answer = await self.api.call("POST", "/admin/stop", body)
        return Stopped.model_validate(answer).to_record()

    async def resume_submissions(self, leaderboard: str | None) -> bool:
        answer = await self.api.call("POST", "/admin/start", {"leaderboard": leaderboard})
        return Started.model_validate(answer).was_paused

    async def pauses(self) -> list[Pause]:
        return [
            PauseView.model_validate(p).to_record() for p in await self.api.get("/admin/pauses")
        ]

    async def ban_user(
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

    async def unban_user(self, external_id: str) -> bool:
        answer = await self.api.call("DELETE", f"/admin/bans/{seg(external_id)}")
        return UserDone.model_validate(answer).status == "unbanned"

    async def bans(self) -> list[Ban]:
        return [BanView.model_validate(b).to_record() for b in await self.api.get("/admin/bans")]

    async def invalidate_submission(self, submission_id: int, reason: str, actor: str) -> None:
        path = f"/admin/submissions/{seg(submission_id)}/invalidate"
        await self.api.call("POST", path, {"reason": reason})

    async def restore_submission(self, submission_id: int) -> None:
        await self.api.call("POST", f"/admin/submissions/{seg(submission_id)}/restore")

    async def rerun(
        self, leaderboard: str, *, user: str | None = None, submission_id: int | None = None
    ) -> list[Job]:
        body = {"user": user, "submission_id": submission_id}
        answer = await self.api.call("POST", f"/admin/leaderboards/{seg(leaderboard)}/rerun", body)
        return [j.to_record() for j in Rerun.model_validate(answer).queued]

    async def set_closed(self, name: str, closed: bool) -> None:
        action = "close" if closed else "open"
        await self.api.call("POST", f"/admin/leaderboards/{seg(name)}/{action}")

    async def after_deadline_refusals(self) -> list[AfterDeadlineRefusal]:
        found = await self.api.get("/admin/after-deadline-refusals")
        return [AfterDeadlineRefusalView.model_validate(r).to_record() for r in found]

    async def channel_policies(self) -> list[ChannelPolicySetting]:
        found = await self.api.get("/admin/channel-policies")
        return [ChannelPolicySettingView.model_validate(p).to_record() for p in found]

    async def mint_invites(self, name: str, count: int, max_uses: int, actor: str) -> list[str]:
        body = {"leaderboard": name, "count": count, "max_uses": max_uses}
        return Minted.model_validate(await self.api.call("POST", "/admin/invites", body)).codes

    async def invites(self, name: str) -> list[Invite]:
        found = await self.api.get(f"/admin/leaderboards/{seg(name)}/invites")
        return [InviteView.model_validate(i).to_record() for i in found]

    async def revoke_invite(self, code: str) -> bool:
        answer = await self.api.call("DELETE", f"/admin/invites/{seg(code)}")
        return InviteRevoked.model_validate(answer).revoked

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
