"""The filter a front end's user chose (core.profiling.chosen_options): nothing chosen is no
filter, a bad choice names the option it came from."""

from __future__ import annotations

import pytest

from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.core.profiling import (
    InvalidProfileOptions,
    ProfileOptions,
    chosen_options,
)


def test_nothing_chosen_is_no_filter_and_the_rest_defaults() -> None:
    assert chosen_options() is None
    assert chosen_options(launch_count=3) == ProfileOptions(launch_count=3)
    assert chosen_options(kernel_name="gemm") == ProfileOptions(kernel_name="gemm")


@pytest.mark.parametrize(
    ("changes", "option"),
    [
        ({"kernel_name": "gemm("}, "kernel_name"),
        ({"kernel_name": "gemm", "kernel_name_base": "short"}, "kernel_name_base"),
        ({"kernel_name_base": "demangled"}, "kernel_name_base"),  # no name to match
        ({"launch_skip": 10_001}, "launch_skip"),
        ({"launch_count": 0}, "launch_count"),
    ],
)
def test_a_bad_choice_names_its_option(changes: dict, option: str) -> None:
    with pytest.raises(InvalidProfileOptions) as caught:
        chosen_options(**changes)
    assert caught.value.option == option
    assert isinstance(caught.value, ClusterManagerError)  # every front end shows its text
