"""Nsight Compute's filter through the HTTP API: the `ncu_*` multipart fields of a profile go
from the request to the stored submission, through the scheduler and the local launcher to
the command line ncu is started with (a fake ncu on PATH records it in the report it writes,
which comes back in the profile's zip); a bad field is refused by name, and nothing is stored."""

from __future__ import annotations

import base64
import io
import zipfile
from pathlib import Path
from typing import Any

import httpx
import pytest

from cluster_manager.api.routes.popcorn import ncu_filter
from cluster_manager.app import App
from cluster_manager.core.profiling import ProfileOptions, form_fields
from tests.api.conftest import BOARD, source, token_of
from tests.api.test_popcorn_replay import Popcorn, result_event, stream_profile
from tests.api.test_remote_cli import run_cli
from tests.support.fake_ncu import option_values, recorded_argv

FILTER = {
    "ncu_kernel_name": "custom_.*",
    "ncu_kernel_name_base": "demangled",
    "ncu_launch_skip": "1",
    "ncu_launch_count": "3",
}


@pytest.fixture
async def popcorn(app: App, live_url: str, api: Any) -> Popcorn:
    api.state.status_interval_s = 0.2
    return Popcorn(live_url, await token_of(app, "alice"))


async def submissions(app: App) -> int:
    count: int = await app.pool.fetchval("SELECT count(*) FROM submissions")
    return count


def ncu_report(result: dict[str, Any]) -> bytes:
    """The report in the first profiled case's zip, as popcorn-cli saves it."""
    (item,) = result["results"]
    profile = item["runs"]["profile.0"]["profile"]
    assert profile["profiler"] == "ncu", profile
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(profile["trace"]))) as trace:
        return trace.read("profile.ncu-rep")


@pytest.mark.usefixtures("scheduler")
async def test_the_filter_reaches_ncus_command_line(app: App, popcorn: Popcorn, fake_ncu: Path):
    answer = await stream_profile(popcorn, "/profile/{lb}/{gpu}", FILTER)
    assert answer.status_code == 200, answer.text

    argv = recorded_argv(ncu_report(result_event(answer)))
    options = option_values(argv)
    assert options["--kernel-name"] == "regex:custom_.*"
    assert options["--kernel-name-base"] == "demangled"
    assert (options["--launch-skip"], options["--launch-count"]) == ("1", "3")
    stored = await app.pool.fetchval("SELECT profile_options FROM submissions")
    assert stored == {
        "kernel_name": "custom_.*",
        "kernel_name_base": "demangled",
        "launch_skip": 1,
        "launch_count": 3,
    }


@pytest.mark.usefixtures("scheduler")
async def test_without_fields_ncu_gets_the_default_filter(app: App, popcorn: Popcorn, fake_ncu):
    answer = await stream_profile(popcorn, "/profile/{lb}/{gpu}", {"benchmark_index": "0"})
    assert answer.status_code == 200, answer.text

    options = option_values(recorded_argv(ncu_report(result_event(answer))))
    assert "--kernel-name" not in options
    assert (options["--launch-skip"], options["--launch-count"]) == ("0", "10")
    assert await app.pool.fetchval("SELECT profile_options FROM submissions") is None


async def test_the_polling_route_stores_the_filter_of_a_profile(
    app: App, client: httpx.AsyncClient
):
    token = await token_of(app, "bob")
    answer = await client.post(
        f"/submission/{BOARD}/CPU/profile",
        headers={"X-Popcorn-Cli-Id": token},
        files={"file": ("submission.py", source())},
        data={"ncu_launch_count": "5"},
    )
    assert answer.status_code == 202, answer.text
    submission_id = answer.json()["details"]["id"]
    stored = (await app.service.submissions.report(submission_id)).submission
    assert stored.profile is not None and stored.profile.launch_count == 5
    assert stored.profile.kernel_name is None


async def test_our_cli_sends_the_filter_through_the_api(app: App, live_url: str, tmp_path: Path):
    file = tmp_path / "submission.py"
    file.write_bytes(source())
    done = await run_cli(
        "submit", BOARD, str(file), "--gpu", "CPU", "--mode", "profile",
        "--ncu-kernel-name", "custom_kernel", "--ncu-launch-count", "4", "--no-wait",
        url=live_url, token=await token_of(app, "dave"), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    stored = await app.pool.fetchval("SELECT profile_options FROM submissions")
    assert stored["kernel_name"] == "custom_kernel" and stored["launch_count"] == 4
    assert stored["kernel_name_base"] == "function" and stored["launch_skip"] == 0


@pytest.mark.parametrize(
    ("mode", "fields", "detail"),
    [
        (
            "profile",
            {"ncu_kernel_name": "gemm("},
            "ncu_kernel_name: kernel name filter: not a regex",
        ),
        (
            "profile",
            {"ncu_kernel_name": "x" * 201},
            "ncu_kernel_name: kernel name filter: 1 to 200",
        ),
        ("profile", {"ncu_launch_count": "0"}, "ncu_launch_count: launch count: a whole number"),
        ("profile", {"ncu_launch_count": "51"}, "ncu_launch_count: launch count: a whole number"),
        ("profile", {"ncu_launch_count": "ten"}, "ncu_launch_count must be a whole number"),
        ("profile", {"ncu_launch_skip": "-1"}, "ncu_launch_skip: launch skip: a whole number"),
        (
            "profile",
            {"ncu_kernel_name": "gemm", "ncu_kernel_name_base": "short"},
            "ncu_kernel_name_base: kernel name base: one of function, demangled, mangled",
        ),
        (
            "profile",
            {"ncu_kernel_name_base": "mangled"},
            "ncu_kernel_name_base: kernel name base: only with a kernel name filter",
        ),
        ("test", {"ncu_kernel_name": "gemm"}, "for profile mode only, not test mode"),
        ("leaderboard", {"ncu_launch_count": "3"}, "for profile mode only, not leaderboard mode"),
    ],
)
async def test_a_bad_filter_is_400_by_field_name_and_stores_nothing(
    app: App, client: httpx.AsyncClient, mode: str, fields: dict[str, str], detail: str
):
    token = await token_of(app, "carol")
    for route in (f"/submission/{BOARD}/CPU/{mode}", f"/{BOARD}/CPU/{mode}"):
        answer = await client.post(
            route,
            headers={"X-Popcorn-Cli-Id": token},
            files={"file": ("submission.py", source())},
            data=fields,
        )
        assert answer.status_code == 400, answer.text
        assert detail in answer.json()["detail"]
    assert await submissions(app) == 0


@pytest.mark.parametrize(
    "options",
    [
        None,
        ProfileOptions(launch_skip=5),
        ProfileOptions(kernel_name="a|b", kernel_name_base="mangled", launch_count=50),
    ],
)
def test_our_clients_fields_read_back_as_the_same_filter(options: ProfileOptions | None) -> None:
    fields = form_fields(options)
    assert all(name.startswith("ncu_") for name in fields)
    assert ncu_filter(fields) == (None if options == ProfileOptions() else options)
