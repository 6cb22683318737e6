"""The task's reference, run in the harness process: it generates every case's inputs again
and checks every output the workers send, so nothing a worker patches changes a verdict."""

from __future__ import annotations

import inspect
from typing import Any

from cluster_manager.core.models import Case
from cluster_manager.harness import output_types
from cluster_manager.harness.outcome import wrong
from cluster_manager.harness.tensors import not_plain, to_device_of


class Reference:
    """The task's generator and check, imported before any worker imports the submission."""

    def __init__(self) -> None:
        import reference  # type: ignore[import-not-found]

        self._module = reference

    def generate(self, args: Case, rank: int | None) -> Any:
        generate_input = self._module.generate_input
        return generate_input(**args) if rank is None else generate_input(**args, rank=rank)

    def takes_seed(self) -> bool:
        """Whether the generator can be given a seed the case does not name."""
        try:
            parameters = inspect.signature(self._module.generate_input).parameters.values()
        except (TypeError, ValueError):
            return False
        return any(p.name == "seed" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)

    def check(self, args: Case, rank: int | None, output: Any, data: Any = None) -> str:
        """Checks `output` against inputs generated here (`data`, when this process made them
        already for the call); accepts both check styles (an error string, empty when right,
        or `(ok, message)`). Raises CaseFailed when wrong."""
        problem = not_plain(output)
        if problem:
            raise wrong(problem)
        if data is None:
            data = self.generate(args, rank)
        try:
            output = output_types.rebuild(to_device_of(output, data))
        except (ValueError, TypeError) as exc:
            raise wrong(str(exc)) from None
        result = self._module.check_implementation(data, output)
        if isinstance(result, tuple):
            ok, message = bool(result[0]), str(result[1] or "")
        else:
            ok, message = not result, str(result or "")
        if not ok:
            raise wrong(message or "wrong answer")
        return message
