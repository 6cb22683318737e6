"""Without DATABASE_URL the project starts a real Postgres of its own, migrates it, keeps the
data across restarts and stops it on exit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cluster_manager.app import open_app
from cluster_manager.settings import Settings
from tests.conftest import load_task, write_task


def _postgres_serving(data_dir: Path) -> bool:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"postgres" in cmdline and str(data_dir).encode() in cmdline:
                return True
    return False


@pytest.mark.reliability(
    "Faults",
    "the app without DATABASE_URL is stopped and started again",
    "its embedded Postgres is stopped on exit and the data is still there after the restart",
)
async def test_embedded_database_is_migrated_persistent_and_stopped(tmp_path: Path):
    settings = Settings(database_url=None, data_dir=tmp_path / "data")
    task = load_task(write_task(tmp_path / "task"))
    async with open_app(settings) as app:
        assert app.embedded and app.new_database
        assert "host=" in app.database_url  # a private unix socket, no TCP port
        await app.service.leaderboards.create(
            "kept", task, datetime.now(UTC) + timedelta(days=1), ["CPU"]
        )
        assert _postgres_serving(tmp_path / "data" / "postgres")
    assert not _postgres_serving(tmp_path / "data" / "postgres")

    async with open_app(settings) as app:  # a restart finds the data again
        assert not app.new_database
        names = [b.name for b in await app.service.leaderboards.all()]
        assert names == ["kept"]
