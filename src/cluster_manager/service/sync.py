"""Syncing a problem set: every problem's leaderboard created or brought up to date in one
transaction (all or nothing), changes that make stored scores incomparable applied only with
`force`, a second sync without changes doing nothing."""

from __future__ import annotations

from collections.abc import Sequence

from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.core.sync_plan import Action, PlanItem, ProblemSpec, SyncPlan, plan_item
from cluster_manager.core.wording import utc_minute
from cluster_manager.service.context import Context
from cluster_manager.service.leaderboards import Leaderboards, insert_new_leaderboard
from cluster_manager.service.receipts import Submitter
from cluster_manager.service.rules import check_fresh_inputs
from cluster_manager.storage import leaderboards as lb_store
from cluster_manager.storage.database import Connection

# (the problem, and what was left out of it: unknown GPU types and such)
Problems = Sequence[tuple[ProblemSpec, Sequence[str]]]


class ProblemSets:
    """A problem set's leaderboards created or updated at once, by the rules the
    leaderboards part checks a new one with."""

    def __init__(self, ctx: Context, leaderboards: Leaderboards) -> None:
        self.pool = ctx.pool
        self.clock = ctx.clock
        self.leaderboards = leaderboards

    async def sync(
        self,
        problems: Problems,
        *,
        skipped: Sequence[str] = (),
        apply: bool = True,
        force: bool = False,
        creator: Submitter | None = None,
    ) -> SyncPlan:
        """The plan for these problems; with `apply`, carried out in one transaction (an
        item that needs `force` is held back without it)."""
        items, left_out = [], list(skipped)
        for spec, notes in problems:
            board = await lb_store.get_leaderboard(self.pool, spec.name)
            item = plan_item(board, spec, notes)
            if item.action is Action.CREATE:
                if spec.deadline <= self.clock():  # a retired problem: nothing to open
                    left_out.append(
                        f"{spec.name}: its deadline {utc_minute(spec.deadline)} "
                        "has passed, so it is not created"
                    )
                    continue
                self.leaderboards.check_new(spec.name, spec.task, spec.deadline, spec.gpus, None)
                await self.leaderboards.check_served(spec.gpus)
            elif board is not None:
                await self.leaderboards.check_served(
                    set(spec.gpus) - set(board.gpus)
                )  # the types it gains
                if board.task != spec.task:  # a new task: its cases too
                    check_fresh_inputs(spec.task)
            items.append(item)
        plan = SyncPlan(tuple(items), tuple(left_out))
        if apply:
            async with self.pool.acquire() as conn, conn.transaction():
                for item in plan.items:
                    if item.needs_force and not force:
                        continue
                    await self._apply(conn, item, creator)
        return plan

    async def _apply(self, conn: Connection, item: PlanItem, creator: Submitter | None) -> None:
        spec = item.spec
        if item.action is Action.CREATE:
            created = await insert_new_leaderboard(
                conn, spec.name, spec.task, spec.deadline, spec.gpus, creator, None
            )
            if not created:  # made by someone else since the plan was read
                raise ClusterManagerError(f"{spec.name!r} was created meanwhile: sync again")
        elif item.action is Action.UPDATE:
            board = await lb_store.get_leaderboard(conn, spec.name)
            if board is None:
                raise ClusterManagerError(f"{spec.name!r} was deleted meanwhile: sync again")
            await lb_store.update_leaderboard(
                conn, board.id, deadline=spec.deadline, task=spec.task, gpus=spec.gpus
            )
