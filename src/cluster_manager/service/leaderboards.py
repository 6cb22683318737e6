"""Leaderboards: creating, reading, ranking and deleting them."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime

import asyncpg

from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.core.models import Task
from cluster_manager.core.names import close_names, did_you_mean, same_but_case
from cluster_manager.core.protocol import new_secret_seed
from cluster_manager.core.records import (
    HistoryKey,
    Leaderboard,
    LeaderboardSummary,
    RankingEntry,
    RunRecord,
    ScoreHistory,
    ScorePoint,
    check_leaderboard_name,
)
from cluster_manager.core.speed_of_light import Peaks
from cluster_manager.core.task_folder import folder_files
from cluster_manager.core.wording import utc_minute
from cluster_manager.service.context import Context
from cluster_manager.service.errors import (
    AlreadyExistsError,
    GpuNotAllowedError,
    GpuNotServedError,
    InvalidDeadlineError,
    NotFoundError,
)
from cluster_manager.service.receipts import Submitter
from cluster_manager.service.rules import (
    check_devices,
    check_fresh_inputs,
    check_may_delete,
    check_run_fits,
    redact,
)
from cluster_manager.storage import history as history_store
from cluster_manager.storage import leaderboards as lb_store
from cluster_manager.storage import runs as run_store
from cluster_manager.storage import served as served_store
from cluster_manager.storage.database import Connection


def board_gpu(board: Leaderboard, gpu: str, known: Collection[str] = ()) -> str:
    """`gpu` as the board spells it (`cpu` is `CPU`). A name that no GPU type of the registry
    (`known`) has is likely a typo: refused with the names it likely meant, the board's close
    ones, else the registry's (`h10`: H100), as `eval --gpu` says. A type the board does not
    run on is refused with those it does."""
    found = same_but_case(gpu, board.gpus)
    if found is not None:
        return found
    runs = ", ".join(board.gpus)
    if same_but_case(gpu, known) is None:
        if hint := did_you_mean(gpu, board.gpus):
            raise GpuNotAllowedError(
                f"{board.name!r} does not run on {gpu!r}{hint} (it runs on {runs})"
            )
        if close := close_names(gpu, known):
            raise GpuNotAllowedError(
                f"unknown GPU type {gpu!r}; did you mean {' or '.join(close)}? "
                f"({board.name!r} runs on {runs})"
            )
    raise GpuNotAllowedError(f"{board.name!r} does not run on {gpu!r}; choose from {runs}")


async def insert_new_leaderboard(
    conn: Connection,
    name: str,
    task: Task,
    deadline: datetime,
    gpus: Sequence[str],
    creator: Submitter | None,
    rate_limit_per_hour: int | None,
) -> bool:
    """Stores a checked new leaderboard with a fresh secret seed; False if the name is taken.
    Call in a transaction."""
    creator_id = None
    if creator is not None:
        creator_id = (await lb_store.upsert_user(conn, creator.external_id, creator.name)).id
    leaderboard_id = await lb_store.insert_leaderboard(
        conn,
        name=name,
        deadline=deadline,
        task=task,
        gpus=tuple(gpus),
        creator_id=creator_id,
        secret_seed=new_secret_seed(),
        rate_limit_per_hour=rate_limit_per_hour,
    )
    return leaderboard_id is not None


def missing(name: str, known: Iterable[str] = ()) -> NotFoundError:
    """No such leaderboard; `known`: the names the asker may see, for a typo's hint (never
    an invite-only one they have not joined: the hint would tell that it exists)."""
    return NotFoundError(f"there is no leaderboard named {name!r}{did_you_mean(name, known)}")


async def missing_for(
    pool: asyncpg.Pool, name: str, viewer: Submitter | None, include_closed: bool = False
) -> NotFoundError:
    """`missing`, with a hint among the leaderboards `viewer` may see."""
    who = None if viewer is None else viewer.external_id
    return missing(
        name, [b.name for b in await lb_store.list_leaderboards(pool, who, include_closed)]
    )


async def find_leaderboard(pool: asyncpg.Pool, name: str) -> Leaderboard:
    found = await lb_store.get_leaderboard(pool, name)
    if found is None:
        raise await missing_for(pool, name, None)
    return found


async def visible_or_none(
    pool: asyncpg.Pool, name: str, viewer: Submitter | None, include_closed: bool
) -> Leaderboard | None:
    """The leaderboard if `viewer` may see it: open ones, invite-only ones they joined, all
    with `include_closed` (admins). The one rule of every listing and every reading route."""
    who = None if viewer is None else viewer.external_id
    return await lb_store.get_visible_leaderboard(pool, name, who, include_closed)


class Leaderboards:
    """Creating, reading, ranking and deleting leaderboards."""

    def __init__(self, ctx: Context, unserved_gpus: Mapping[str, str] | None = None) -> None:
        self.pool = ctx.pool
        self.registry = ctx.registry
        self.clock = ctx.clock
        # GPU types this process has no launcher for, each with why (GpuRegistry.unserved_by).
        self.unserved_gpus = dict(unserved_gpus or {})

    async def gpus_not_served(self) -> dict[str, str]:
        """The GPU types a new leaderboard may not list, each with why: this process has no
        launcher for them and no live scheduler elsewhere (a worker with the credentials)
        has said that it runs them."""
        if not self.unserved_gpus:
            return {}
        elsewhere = set(await served_store.served_gpus(self.pool))
        return {gpu: why for gpu, why in self.unserved_gpus.items() if gpu not in elsewhere}

    def published_peaks(self, gpus: Collection[str]) -> dict[str, Peaks]:
        """The peaks the registry states for these GPU types (those without have none): what
        a leaderboard's speed of light is computed against."""
        types = self.registry.types
        return {gpu: peaks for gpu in gpus if gpu in types and (peaks := types[gpu].peaks)}

    async def check_served(self, gpus: Collection[str]) -> None:
        """Refuses GPU types that nothing here runs: their jobs would wait for good."""
        if not self.unserved_gpus.keys() & set(gpus):
            return
        unserved = await self.gpus_not_served()
        for gpu in gpus:
            if gpu in unserved:
                raise GpuNotServedError(f"cannot run a leaderboard on {gpu}: {unserved[gpu]}")

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
        self.check_new(name, task, deadline, gpus, rate_limit_per_hour)
        await self.check_served(gpus)
        async with self.pool.acquire() as conn, conn.transaction():
            created = await insert_new_leaderboard(
                conn, name, task, deadline, gpus, creator, rate_limit_per_hour
            )
            if not created:
                raise AlreadyExistsError(f"a leaderboard named {name!r} already exists")
        return await self.get(name)

    def check_new(
        self,
        name: str,
        task: Task,
        deadline: datetime,
        gpus: Sequence[str],
        rate_limit_per_hour: int | None,
    ) -> None:
        """Everything a new leaderboard must satisfy, checked before anything is stored."""
        check_leaderboard_name(name)
        check_fresh_inputs(task)
        if deadline.tzinfo is None:
            raise InvalidDeadlineError("the deadline needs a time zone")
        if deadline <= self.clock():
            raise InvalidDeadlineError(f"the deadline {utc_minute(deadline)} has already passed")
        if not gpus:
            raise GpuNotAllowedError("a leaderboard needs at least one GPU type")
        for gpu in gpus:
            check_run_fits(task, self.registry.get(gpu))
            check_devices(task, self.registry.get(gpu))
        if len(set(gpus)) != len(gpus):
            raise GpuNotAllowedError(f"GPU types listed twice: {sorted(gpus)}")
        if rate_limit_per_hour is not None and rate_limit_per_hour <= 0:
            raise ClusterManagerError("the rate limit must be a positive number per hour")

    async def get(self, name: str) -> Leaderboard:
        return await find_leaderboard(self.pool, name)

    async def visible(
        self, name: str, viewer: Submitter | None = None, *, include_closed: bool = False
    ) -> Leaderboard:
        """`get` for `viewer`: an invite-only one they have not joined is missing, in
        the same words, so that a front end cannot tell that it exists."""
        found = await visible_or_none(self.pool, name, viewer, include_closed)
        if found is None:
            raise await missing_for(self.pool, name, viewer, include_closed)
        return found

    async def all(
        self, viewer: Submitter | None = None, *, include_closed: bool = False
    ) -> list[LeaderboardSummary]:
        """What `viewer` may see: open leaderboards, and closed ones they joined; everything
        with `include_closed` (admins, organisers on the server)."""
        who = None if viewer is None else viewer.external_id
        return await lb_store.list_leaderboards(self.pool, who, include_closed)

    async def names(
        self,
        typed: str = "",
        viewer: Submitter | None = None,
        *,
        include_closed: bool = False,
    ) -> list[str]:
        """Names to offer someone typing `typed`: see `storage.leaderboards.leaderboard_names`."""
        who = None if viewer is None else viewer.external_id
        found = await lb_store.leaderboard_names(
            self.pool, who, include_closed, typed, self.clock()
        )
        return [name for name, _ in found]

    async def submittable_names(
        self, typed: str = "", viewer: Submitter | None = None, *, include_closed: bool = False
    ) -> list[tuple[str, bool]]:
        """(name, whether it is open) of the leaderboards `viewer` may submit to now that hold
        `typed`: open ones first, then ended ones taking runs after their deadline."""
        who = None if viewer is None else viewer.external_id
        return await lb_store.leaderboard_names(
            self.pool, who, include_closed, typed, self.clock(), submittable_only=True
        )

    async def delete(
        self, name: str, *, actor: Submitter | None = None, admin: bool = True
    ) -> None:
        """Deletes it with all its submissions. Non-admins may delete only what they created."""
        board = await self.get(name)
        check_may_delete(board, actor, admin=admin)
        async with self.pool.acquire() as conn, conn.transaction():
            await lb_store.delete_leaderboard(conn, board.id)

    async def ranking(
        self,
        name: str,
        gpu: str | None = None,
        *,
        limit: int = 100,
        offset: int = 0,
        after_deadline: bool = False,
    ) -> dict[str, list[RankingEntry]]:
        """Per GPU, the competition's ranking, or with `after_deadline` that of the runs made
        after the deadline (which never enter the competition's)."""
        board = await self.get(name)
        gpus = [self.board_gpu(board, gpu)] if gpu is not None else list(board.gpus)
        return {
            g: await run_store.ranking(
                self.pool,
                leaderboard_id=board.id,
                gpu=g,
                limit=limit,
                offset=offset,
                after_deadline=after_deadline,
            )
            for g in gpus
        }

    def board_gpu(self, board: Leaderboard, gpu: str) -> str:
        """`gpu` as `board` spells it, or refused with the names it likely meant."""
        return board_gpu(board, gpu, self.registry.names)

    async def history_key(self, board: Leaderboard | str, gpu: str) -> HistoryKey:
        """The current state of the ranking's history on `gpu`: one cheap read that says
        whether what was derived from the history (a chart) is still up to date."""
        if isinstance(board, str):
            board = await self.get(board)
        gpu = self.board_gpu(board, gpu)
        return HistoryKey(board.name, gpu, await history_store.history_version(self.pool, board.id))

    async def score_history(self, name: str, gpu: str) -> ScoreHistory:
        """Every improvement of a user's best on `gpu`, as the ranking accepted it."""
        board = await self.get(name)
        gpu = self.board_gpu(board, gpu)
        version = await history_store.history_version(self.pool, board.id)
        rows = await history_store.score_history(self.pool, leaderboard_id=board.id, gpu=gpu)
        points = tuple(ScorePoint(user, score, at) for user, score, at in rows)
        return ScoreHistory(board.name, gpu, points, version)

    async def personal_runs(self, name: str, user: Submitter) -> list[RunRecord]:
        """All of one user's runs; secret runs show only their verdict."""
        board = await self.get(name)
        found = await lb_store.get_user(self.pool, user.external_id)
        if found is None:
            return []
        runs = await run_store.runs_of_user(self.pool, leaderboard_id=board.id, user_id=found.id)
        return [redact(r) for r in runs]

    async def task_files(self, name: str) -> dict[str, str]:
        """The files a participant may read (the submission slot is theirs to write), its
        templates and a task.yml: a folder `eval` runs as it is."""
        return folder_files((await self.get(name)).task)

    async def templates(self, name: str) -> dict[str, str]:
        return dict((await self.get(name)).task.templates)
