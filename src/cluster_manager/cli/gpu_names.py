"""GPU type names as users type them: `--gpu cpu` is `CPU`; a name that is none says which
it may have meant."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable

from cluster_manager.app import load_settings_registry
from cluster_manager.cli.common import fail
from cluster_manager.core.gpus import UnknownGpuError
from cluster_manager.settings import Settings


def canonical_gpu(given: str, known: Collection[str]) -> str:
    """`given` as the registry spells it: a known name, or the one name that differs from it
    only in case (`cpu` is `CPU`). Else `UnknownGpuError`, naming the closest names."""
    if given in known:
        return given
    by_folded: dict[str, list[str]] = {}
    for name in known:
        by_folded.setdefault(name.casefold(), []).append(name)
    same = by_folded.get(given.casefold(), [])
    if len(same) == 1:
        return same[0]
    close = same or [
        name
        for folded in difflib.get_close_matches(given.casefold(), by_folded)
        for name in by_folded[folded]
    ]
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
