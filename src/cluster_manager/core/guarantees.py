"""What a task's ranked timings can be trusted for, read from the task alone: which harness
times it, and, for the built-in one, whether every timed iteration can get fresh inputs.

Read statically (the reference's source with `ast`): the task's code never runs in the bot.
`leaderboard check` tells an organiser; `leaderboard create` and sync refuse a task whose timed
iterations would all time the same inputs.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from cluster_manager.core import protocol
from cluster_manager.core.models import Language, Task

REFERENCE_FILE = "reference.py"  # the module the built-in harness imports as `reference`
GENERATOR = "generate_input"

BUILT_IN = "the built-in harness"
FRESH_INPUTS = "fresh inputs on every timed iteration"
BUILT_IN_GUARANTEES = (
    "inputs made by the harness process, out of the submission's reach",
    "each ranked call replayed by a trusted stand-in on the same inputs",
    "ranked seeds a keyed hash of the secret, never sent to the submission",
    FRESH_INPUTS,
)


@dataclass(frozen=True)
class Guarantees:
    harness: str  # what times the submission
    holds: tuple[str, ...]  # what the ranking can rely on
    caveat: str = ""  # what does not hold, and what bounds the submission instead
    problem: str = ""  # why the task cannot be ranked fairly; "" when it can


def guarantees(task: Task) -> Guarantees:
    if task.lang is Language.CUDA:
        return _own("its own harness (eval.cu, compiled into the submission's process)")
    if task.main is not None:
        return _own(f"its own harness ({task.main})")
    takes_seed = generator_takes_seed(task)
    seedless = seedless_benchmarks(task)
    if not seedless or takes_seed:
        return Guarantees(BUILT_IN, BUILT_IN_GUARANTEES)
    holds = tuple(g for g in BUILT_IN_GUARANTEES if g != FRESH_INPUTS)
    if takes_seed is None:
        caveat = (
            f"{_cases(seedless)} no seed and {REFERENCE_FILE} does not define {GENERATOR} "
            "as a plain function: whether each timed iteration gets fresh inputs is decided "
            "when it runs (it does if the generator takes `seed` or **kwargs)"
        )
        return Guarantees(BUILT_IN, holds, caveat=caveat)
    return Guarantees(BUILT_IN, holds, problem=fresh_inputs_problem(task))


def _own(harness: str) -> Guarantees:
    caveat = (
        "it imports the submission into the process that holds POPCORN_SEED and times it: "
        "none of the built-in harness's guarantees hold (inputs out of the submission's reach, "
        "a trusted replay of each ranked call, keyed ranked seeds, fresh inputs on every timed "
        "iteration); only the sandbox bounds the submission"
    )
    return Guarantees(harness, (), caveat=caveat)


def fresh_inputs_problem(task: Task) -> str:
    """Why a built-in-harness task's timed iterations would all time the same inputs (a
    submission could memoise its answers), or "": some benchmark has no seed, and the
    generator takes none the harness could supply."""
    if task.lang is not Language.PYTHON or task.main is not None:
        return ""
    seedless = seedless_benchmarks(task)
    if not seedless or generator_takes_seed(task) is not False:
        return ""
    return (
        f"{_cases(seedless)} no seed and {REFERENCE_FILE}'s {GENERATOR} takes none, so every "
        "timed iteration would time the same inputs and a submission could replay cached "
        f"answers: give each benchmark a seed, or let {GENERATOR} take `seed`"
    )


def seedless_benchmarks(task: Task) -> tuple[int, ...]:
    """The indexes of the benchmarks that name no integer seed."""
    return tuple(i for i, c in enumerate(task.benchmarks) if not protocol.is_integer(c.get("seed")))


def _cases(indexes: tuple[int, ...]) -> str:
    named = ", ".join(f"benchmarks[{i}]" for i in indexes)
    return f"{named} {'has' if len(indexes) == 1 else 'have'}"


def generator_takes_seed(task: Task) -> bool | None:
    """Whether the reference's generator accepts a `seed` (by name or through **kwargs), as
    the harness asks at run time; None when its source does not say (no reference.py, or the
    name is bound by anything but a plain `def`)."""
    reference = next((f for f in task.files if f.name == REFERENCE_FILE), None)
    if reference is None or reference.content is None:
        return None
    try:
        tree = ast.parse(reference.content)
    except (SyntaxError, ValueError):
        return None
    last: ast.stmt | None = None  # the module's last top-level binding of the name wins
    for node in tree.body:
        if GENERATOR in _bound_names(node):
            last = node
    if not isinstance(last, ast.FunctionDef | ast.AsyncFunctionDef) or last.decorator_list:
        return None  # imported, assigned, or wrapped: its signature is not in this file
    args = last.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    if args.vararg is not None:
        names.append(args.vararg.arg)
    return "seed" in names or args.kwarg is not None


def _bound_names(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    # Assignments, conditionals, loops, `with`, `try`: any name stored anywhere inside.
    return {
        n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
