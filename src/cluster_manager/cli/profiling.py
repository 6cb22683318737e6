"""`submit --mode profile`'s Nsight Compute filter: the options, and the filter they make,
refused through click's own error path when a value or the mode does not fit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.core.models import Mode
from cluster_manager.core.profiling import (
    MAX_LAUNCH_COUNT,
    NAME_BASES,
    InvalidProfileOptions,
    ProfileOptions,
    chosen_options,
)
from cluster_manager.service.submissions import check_profile_options

F = TypeVar("F", bound=Callable[..., Any])
# Each option with the ProfileOptions field it sets.
OPTIONS = {
    "--ncu-kernel-name": "kernel_name",
    "--ncu-kernel-name-base": "kernel_name_base",
    "--ncu-launch-skip": "launch_skip",
    "--ncu-launch-count": "launch_count",
}


def ncu_options(command: F) -> F:
    """Adds the filter's options (all unset by default: ncu's default filter)."""
    decorators = [
        click.option(
            "--ncu-kernel-name",
            metavar="REGEX",
            help="Profile mode: capture only kernels whose name matches this regex.",
        ),
        click.option(
            "--ncu-kernel-name-base",
            type=click.Choice(NAME_BASES),
            help="Profile mode: the form of the name the regex is matched against "
            "(default: function).",
        ),
        click.option(
            "--ncu-launch-skip",
            type=int,
            metavar="N",
            help="Profile mode: matching launches passed over first (default: 0).",
        ),
        click.option(
            "--ncu-launch-count",
            type=int,
            metavar="N",
            help=f"Profile mode: launches captured, 1 to {MAX_LAUNCH_COUNT} (default: 10).",
        ),
    ]
    for decorate in reversed(decorators):
        command = decorate(command)
    return command


def chosen_filter(mode: Mode, values: dict[str, Any]) -> ProfileOptions | None:
    """The filter the options chose (None: none given); a bad value or a filter outside
    profile mode is a usage error naming the option."""
    try:
        profile = chosen_options(
            **{field: values[option[2:].replace("-", "_")] for option, field in OPTIONS.items()}
        )
    except InvalidProfileOptions as exc:
        option = next(name for name, field in OPTIONS.items() if field == exc.option)
        raise click.BadParameter(str(exc), param_hint=f"'{option}'") from None
    try:
        check_profile_options(mode, profile)
    except ClusterManagerError as exc:
        raise click.UsageError(str(exc)) from None
    return profile
