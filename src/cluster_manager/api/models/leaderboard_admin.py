"""The organisers' answers on leaderboards: their settings and who set them, reruns, and a
problem set's sync plan."""

from __future__ import annotations

from typing import Literal

from cluster_manager.api.models.base import ApiModel, Moment
from cluster_manager.api.models.submissions import JobView
from cluster_manager.core.records import ChannelPolicy, Job
from cluster_manager.core.sync_plan import Action, Change, PlanItem, SyncPlan
from cluster_manager.service.port import AfterDeadlineRefusal, ChannelPolicySetting


class ChannelPolicySet(ApiModel):
    leaderboard: str
    channel_policy: ChannelPolicy


class AfterDeadlineSet(ApiModel):
    leaderboard: str
    after_deadline_runs: bool


class TeamRulesSet(ApiModel):
    leaderboard: str
    team_size: int
    team_quotas: bool


class AfterDeadlineRefusalView(ApiModel):
    """A leaderboard that takes no runs after its deadline, with who set that."""

    leaderboard: str
    set_by: str
    set_at: Moment | None

    @classmethod
    def of(cls, refusal: AfterDeadlineRefusal) -> AfterDeadlineRefusalView:
        return cls(leaderboard=refusal.leaderboard, set_by=refusal.set_by, set_at=refusal.set_at)

    def to_record(self) -> AfterDeadlineRefusal:
        return AfterDeadlineRefusal(self.leaderboard, self.set_by, self.set_at)


class ChannelPolicySettingView(ApiModel):
    """A leaderboard's channel policy other than the default, with who set it."""

    leaderboard: str
    policy: ChannelPolicy
    set_by: str
    set_at: Moment

    @classmethod
    def of(cls, setting: ChannelPolicySetting) -> ChannelPolicySettingView:
        return cls(
            leaderboard=setting.leaderboard,
            policy=setting.policy,
            set_by=setting.set_by,
            set_at=setting.set_at,
        )

    def to_record(self) -> ChannelPolicySetting:
        return ChannelPolicySetting(self.leaderboard, self.policy, self.set_by, self.set_at)


class Rerun(ApiModel):
    """`POST /admin/leaderboards/{name}/rerun`: the submissions queued again and their jobs."""

    status: Literal["queued"] = "queued"
    leaderboard: str
    submissions: list[int]
    jobs: int
    queued: list[JobView]

    @classmethod
    def of(cls, leaderboard: str, jobs: list[Job]) -> Rerun:
        return cls(
            leaderboard=leaderboard,
            submissions=sorted({j.submission_id for j in jobs}),
            jobs=len(jobs),
            queued=[JobView.of(j) for j in jobs],
        )


class ChangeView(ApiModel):
    what: str  # deadline, gpus, task file NAME, tests, ...
    detail: str
    invalidates_scores: bool

    @classmethod
    def of(cls, change: Change) -> ChangeView:
        return cls(
            what=change.what, detail=change.detail, invalidates_scores=change.invalidates_scores
        )


class PlanItemView(ApiModel):
    name: str
    action: Action
    needs_force: bool  # stored scores would no longer hold: applied only with `force`
    changes: list[ChangeView]
    notes: list[str]

    @classmethod
    def of(cls, item: PlanItem) -> PlanItemView:
        return cls(
            name=item.spec.name,
            action=item.action,
            needs_force=item.needs_force,
            changes=[ChangeView.of(c) for c in item.changes],
            notes=list(item.notes),
        )


class ProblemSetSync(ApiModel):
    """`POST /admin/update-problems`: the plan, whether it was applied, the problems held
    back for want of `force`, those skipped, and the plan as `leaderboard sync` prints it."""

    problem_set: str
    applied: bool
    held: list[str]
    items: list[PlanItemView]
    skipped: list[str]
    text: str

    @classmethod
    def of(
        cls, name: str, plan: SyncPlan, text: str, *, applied: bool, force: bool
    ) -> ProblemSetSync:
        return cls(
            problem_set=name,
            applied=applied,
            held=[item.spec.name for item in plan.held(force)] if applied else [],
            items=[PlanItemView.of(item) for item in plan.items],
            skipped=list(plan.skipped),
            text=text,
        )
