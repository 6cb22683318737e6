"""GPU type names as users type them: `--gpu cpu` is `CPU`; a name that is none says which
it may have meant."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from cluster_manager.app import load_settings_registry
from cluster_manager.cli.common import fail
from cluster_manager.core.gpus import UnknownGpuError
from cluster_manager.core.names import close_names, same_but_case
from cluster_manager.settings import Settings


def canonical_gpu(given: str, known: Collection[str]) -> str:
    """`given` as the registry spells it: a known name, or the one name that differs from it
    only in case (`cpu` is `CPU`). Else `UnknownGpuError`, naming the closest names (the
    server says the same of a board's GPU types: `service.leaderboards.board_gpu`)."""
    found = same_but_case(given, known)
    if found is not None:
        return found
    close = [name for name in known if name.casefold() == given.casefold()]
    close = close or close_names(given, known)
    hint = f"did you mean {' or '.join(close)}?" if close else f"known: {', '.join(sorted(known))}"
    raise UnknownGpuError(f"unknown GPU type {given!r}; {hint}")


def gpu_names(settings: Settings, given: Iterable[str]) -> list[str]:
    """The GPU types of a `--gpu` option as the registry spells them (a one-line error when
    one is unknown). Through a server a name this machine's registry lacks goes as given:
    the server's registry decides."""
    known = load_settings_registry(settings).names
    folded = {name.casefold() for name in known}
    names = []
    for name in given:
        if settings.api_url is not None and name.casefold() not in folded:
            names.append(name)
            continue
        try:
            names.append(canonical_gpu(name, known))
        except UnknownGpuError as exc:
            fail(str(exc))
    return names
