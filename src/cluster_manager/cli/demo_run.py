"""`make demo`: the whole system on this machine, with the embedded database by default.

Creates leaderboards from the examples, submits correct and wrong kernels as several users,
runs them through the durable queue on the local launcher (each ranked submission twice:
public and secret seed), and prints the verdicts and the rankings. Then it checks that each
example's tuned solution ranks ahead of its template on every GPU type, and says so.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cluster_manager.app import App
from cluster_manager.core.models import Mode
from cluster_manager.core.records import EventState, RankingEntry
from cluster_manager.core.sandboxing import ALLOW_SETTING
from cluster_manager.core.task import load_task
from cluster_manager.rendering.reports import (
    format_duration_ns,
    format_event,
    format_leaderboards,
    format_ranking,
    format_table,
)
from cluster_manager.sandbox.plan import full_sandbox_problem, limits_problem
from cluster_manager.scheduling.config import SchedulerConfig
from cluster_manager.service import NotFoundError, Service, SubmissionReceipt, Submitter


def _lenient_config(app: App, echo: Callable[[str], None]) -> SchedulerConfig | None:
    """On a machine that cannot sandbox fully (no bubblewrap, no user namespaces) or bound runs
    with cgroups, the demo still ranks its own examples in its own embedded database, and says
    so."""
    problem = full_sandbox_problem() or limits_problem()
    if problem is None or not app.embedded or app.settings.allow_unsandboxed_ranking:
        return None
    echo(
        f"This machine cannot sandbox runs fully ({problem}): the demo ranks its examples "
        f"anyway, in its embedded database only, as {ALLOW_SETTING}=1 would."
    )
    return SchedulerConfig(
        limits=app.local_limits(),
        allow_unsandboxed_ranking=True,
        throttle_threshold=app.settings.throttle_threshold,
    )


SHOWN_EVENTS = (EventState.DISPATCHED, EventState.FINISHED, EventState.FAILED)


@dataclass(frozen=True)
class DemoSubmission:
    leaderboard: str
    user: str
    path: str  # relative to the example folder
    mode: Mode
    should_pass: bool


DEMO_LEADERBOARDS = {"demo-identity": "identity_py", "demo-softmax": "softmax_py"}
SOLUTION, TEMPLATE = "submission.py", "template.py"  # each example's tuned kernel and starter
DEMO_SUBMISSIONS = (
    DemoSubmission("demo-identity", "alice", "submission.py", Mode.LEADERBOARD, True),
    DemoSubmission("demo-identity", "bob", "template.py", Mode.LEADERBOARD, True),
    DemoSubmission("demo-identity", "carol", "wrong/wrong_answer.py", Mode.LEADERBOARD, False),
    DemoSubmission("demo-identity", "dave", "wrong/crash.py", Mode.TEST, False),
    DemoSubmission("demo-softmax", "alice", "template.py", Mode.LEADERBOARD, True),
    DemoSubmission("demo-softmax", "bob", "submission.py", Mode.LEADERBOARD, True),
    # Last: its kernel spins until the task's test timeout, which would take a core from the
    # ranked runs beside it.
    DemoSubmission("demo-softmax", "carol", "wrong/timeout.py", Mode.TEST, False),
)


@dataclass(frozen=True)
class DemoOutcome:
    verdicts_ok: bool  # every submission passed or failed as planned
    order_ok: bool  # every solution ranks ahead of its template


async def run_demo(app: App, examples: Path, echo: Callable[[str], None] = print) -> DemoOutcome:
    where = "embedded Postgres" if app.embedded else "the database at DATABASE_URL"
    echo(f"Using {where}; local launcher serves GPU type CPU.")
    await _create_leaderboards(app.service, examples)
    echo(
        format_leaderboards(
            await app.service.leaderboards.all(include_closed=True), datetime.now(UTC)
        )
    )
    echo("")
    receipts = await _submit_all(app.service, examples)
    echo(f"Submitted {len(receipts)} files; following their jobs live:")
    await _run_and_follow(app, receipts, echo)
    as_expected = await _summarise(app.service, receipts, echo)
    echo("")
    in_order = await _check_order(app.service, receipts, echo)
    echo("")
    echo("Try: .venv/bin/cluster-manager leaderboard show demo-identity")
    return DemoOutcome(as_expected, in_order)


Receipts = dict[int, tuple[DemoSubmission, SubmissionReceipt]]


async def _create_leaderboards(service: Service, examples: Path) -> None:
    for name, folder in DEMO_LEADERBOARDS.items():
        with contextlib.suppress(NotFoundError):  # left over from an earlier demo
            await service.leaderboards.delete(name)
        await service.leaderboards.create(
            name,
            load_task(examples / folder),
            datetime.now(UTC) + timedelta(days=7),
            ["CPU"],
            creator=Submitter("demo", "demo"),
        )


async def _submit_all(service: Service, examples: Path) -> Receipts:
    receipts: Receipts = {}
    for plan in DEMO_SUBMISSIONS:
        path = examples / DEMO_LEADERBOARDS[plan.leaderboard] / plan.path
        receipt = await service.submissions.submit(
            plan.leaderboard,
            Submitter(plan.user, plan.user),
            path.name,
            path.read_bytes(),
            mode=plan.mode,
        )
        receipts[receipt.submission_id] = (plan, receipt)
    return receipts


async def _run_and_follow(app: App, receipts: Receipts, echo: Callable[[str], None]) -> None:
    scheduler = app.scheduler(_lenient_config(app, echo), submission_ids=set(receipts))

    async def follow() -> None:
        async for event in app.service.events.watch(*receipts):
            if event.state in SHOWN_EVENTS:
                plan, _ = receipts[event.submission_id]
                echo(
                    f"  #{event.submission_id} {plan.user:<6} {plan.path:<22} {format_event(event)}"
                )

    job_ids = {j.id for _, r in receipts.values() for j in r.jobs}
    await asyncio.gather(scheduler.run_until_idle(job_ids), follow())


async def _summarise(service: Service, receipts: Receipts, echo: Callable[[str], None]) -> bool:
    """Prints each submission's verdicts and the rankings; True if all were as expected."""
    rows, as_expected, surprises = [], True, []
    for submission_id, (plan, _) in receipts.items():
        report = await service.submissions.report(submission_id, admin=True)  # the operator's demo
        verdicts = sorted(
            {r.verdict.value for r in report.runs}
            | {f"failed: {j.error}" for j in report.jobs if j.error and j.state.value == "failed"}
        )
        ok = report.passed == plan.should_pass
        as_expected &= ok
        if not ok:
            surprises += [
                f"#{submission_id} {plan.path}{' (secret run)' if r.secret else ''}: "
                f"{r.result.get('message') or r.verdict.value}"
                for r in report.runs
                if r.passed != plan.should_pass
            ]
        rows.append(
            (
                f"#{submission_id}",
                plan.leaderboard,
                plan.user,
                plan.path,
                plan.mode.value,
                ", ".join(verdicts),
                "yes" if ok else "NO",
            )
        )
    echo("")
    echo(format_table(("id", "leaderboard", "user", "file", "mode", "verdicts", "expected"), rows))
    for line in surprises:
        echo(f"Unexpected: {line}")
    for name in DEMO_LEADERBOARDS:
        echo("")
        echo(format_ranking(name, await service.leaderboards.ranking(name)))
    return as_expected


async def _check_order(service: Service, receipts: Receipts, echo: Callable[[str], None]) -> bool:
    """Per example and GPU type: does the solution's ranked score beat the template's? The
    point of a ranking is that a faster kernel ranks ahead; True when each one does."""
    ok = True
    for name, folder in DEMO_LEADERBOARDS.items():
        ranked = {p.path: r.submission_id for p, r in receipts.values() if p.leaderboard == name}
        if SOLUTION not in ranked or TEMPLATE not in ranked:
            continue
        for gpu, entries in (await service.leaderboards.ranking(name)).items():
            line, fine = order_line(
                folder,
                gpu,
                _score(entries, ranked[SOLUTION]),
                _score(entries, ranked[TEMPLATE]),
            )
            echo(line)
            ok &= fine
    return ok


def _score(entries: list[RankingEntry], submission_id: int) -> float | None:
    return next((e.score for e in entries if e.submission_id == submission_id), None)


def order_line(
    example: str, gpu: str, solution_s: float | None, template_s: float | None
) -> tuple[str, bool]:
    """One example's verdict on the order of its solution and template, and whether it holds."""

    def shown(score: float | None) -> str:
        return "not ranked" if score is None else format_duration_ns(score * 1e9)

    solution, template = shown(solution_s), shown(template_s)
    if solution_s is None or template_s is None:
        return f"{example}: solution {solution}, template {template} on {gpu} ✗", False
    if solution_s < template_s:
        return f"{example}: solution {solution} ranks ahead of template {template} on {gpu} ✓", True
    return (
        f"{example}: solution {solution} does NOT rank ahead of template {template} on {gpu} ✗",
        False,
    )
