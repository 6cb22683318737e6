"""bot_rss_mb_idle and bot_rss_mb_100_inflight: the bot process's resident memory.

`bot_process.py` runs the real ClusterBot (all cogs, its own scheduler, a pool on a real
database) logged in to the fake Discord API (tests/discord/fake_discord.py), which runs here,
in the measuring process, so its memory is not counted. VmRSS is read from
/proc/<pid>/status:
- idle: logged in, commands loaded, scheduler running, nothing submitted;
- 100 in flight: 100 users have each run `/leaderboard submit` (test mode, uploaded script)
  through the real command tree; every job has been claimed and dispatched to a launcher
  that never finishes, and each submission is followed by its live status message (4 over
  database listeners, the rest by polling, the bot's defaults).
Each figure is the median of samples taken after the process has settled.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO

import asyncpg
import discordlib
from benchlib import Figure, log, median, report, scratch_database

from cluster_manager.core.gpus import GpuRegistry, GpuType
from cluster_manager.core.task import load_task
from cluster_manager.data import EXAMPLES_DIR
from cluster_manager.service import Service
from cluster_manager.storage.database import create_pool
from tests.discord.fake_discord import FakeDiscord

IN_FLIGHT = 100
TARGET_IDLE_MB: float | None = None
TARGET_INFLIGHT_MB: float | None = None
SETTLE_S = 5.0
SAMPLES = 10
SAMPLE_GAP_S = 0.5
BOT = Path(__file__).with_name("bot_process.py")
TASK = EXAMPLES_DIR / "identity_py"
REGISTRY = GpuRegistry({"HOLD": GpuType("HOLD", "hold", max_concurrent=1000)})
FIRST_USER = 5000


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


async def sample_rss_mb(pid: int) -> list[float]:
    samples = []
    for _ in range(SAMPLES):
        samples.append(status_kb(pid, "VmRSS") / 1024)
        await asyncio.sleep(SAMPLE_GAP_S)
    return samples


async def read_line(proc: asyncio.subprocess.Process, expected: str, timeout: float) -> None:
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), timeout)
    if line.decode().strip() != expected:
        raise RuntimeError(f"the bot process said {line!r}, not {expected!r}")


def submissions(fake: FakeDiscord, code: bytes) -> list[dict]:
    """Opens the interactions on the fake API and builds their payloads."""
    payloads = []
    for i in range(IN_FLIGHT):
        interaction = fake.open_interaction()
        attachment = fake.upload("submission.py", code)
        payloads.append(
            discordlib.submit_interaction(
                interaction.id,
                interaction.token,
                FIRST_USER + i,
                attachment,
                leaderboard="bench",
                mode="test",
            )
        )
    return payloads


async def wait_in_flight(pool: asyncpg.Pool, fake: FakeDiscord, timeout: float) -> float:
    """Waits until every job is dispatched and every status message shows it."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    while True:
        dispatched = await pool.fetchval("SELECT count(*) FROM jobs WHERE state = 'dispatched'")
        shown = sum(1 for m in fake.messages.values() if "🚀" in m.content)
        if dispatched == IN_FLIGHT and shown == IN_FLIGHT:
            return loop.time() - began
        if loop.time() - began > timeout:
            raise RuntimeError(f"after {timeout:g} s: {dispatched} dispatched, {shown} shown")
        await asyncio.sleep(0.2)


async def drive(
    proc: asyncio.subprocess.Process, pool: asyncpg.Pool, fake: FakeDiscord, log_file: IO[bytes]
) -> dict:
    """Idle samples, then 100 submissions in flight and their samples; stops the bot.
    Returns the measurements and what the bot logged while being measured."""
    assert proc.stdin is not None
    await read_line(proc, "ready", 60)
    await asyncio.sleep(SETTLE_S)
    log("sampling the idle bot")
    idle = await sample_rss_mb(proc.pid)
    payloads = submissions(fake, (TASK / "submission.py").read_bytes())
    proc.stdin.write((json.dumps(payloads) + "\n").encode())
    await proc.stdin.drain()
    await read_line(proc, "dispatched", 30)
    log(f"{IN_FLIGHT} submissions sent; waiting for every job to be dispatched and shown")
    ramp_s = await wait_in_flight(pool, fake, 120)
    await asyncio.sleep(SETTLE_S)
    log(f"sampling the bot with {IN_FLIGHT} submissions in flight")
    busy = await sample_rss_mb(proc.pid)
    measured = {
        "idle": idle,
        "busy": busy,
        "peak_rss_mb": round(status_kb(proc.pid, "VmHWM") / 1024, 1),
        "threads": status_kb(proc.pid, "Threads"),
        "seconds_until_all_in_flight": round(ramp_s, 2),
    }
    log_file.seek(0)
    measured["log"] = log_file.read().decode(errors="replace")  # shutdown noise excluded
    proc.stdin.write(b"stop\n")
    await proc.stdin.drain()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), 30)
    return measured


async def run_bot(url: str, pool: asyncpg.Pool, fake: FakeDiscord) -> dict:
    with tempfile.TemporaryFile() as errors:  # the bot's log: shown only if something failed
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(BOT),
            url,
            fake.api_base,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=errors,
        )
        try:
            measured = await drive(proc, pool, fake, errors)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    log_text = measured.pop("log")
    if "Traceback" in log_text:
        first = log_text[log_text.index("Traceback") :]
        raise RuntimeError(f"the bot logged errors: {first[:3000]}")
    return measured


async def measure(url: str) -> list[Figure]:
    pool = await create_pool(url, max_size=2)
    fake = FakeDiscord()
    await fake.start()
    try:
        service = Service(pool, REGISTRY)
        deadline = datetime.now(UTC) + timedelta(days=1)
        await service.leaderboards.create("bench", load_task(TASK), deadline, ["HOLD"])
        measured = await run_bot(url, pool, fake)
    finally:
        await fake.stop()
        await pool.close()
    late = [i.token for i in fake.interactions.values() if i.late]
    if late:
        raise RuntimeError(f"{len(late)} interactions were acknowledged after 3 s")
    shared = {"samples": SAMPLES, "settle_s": SETTLE_S}
    idle, busy = measured.pop("idle"), measured.pop("busy")
    return [
        Figure(
            "bot_rss_mb_idle",
            median(idle),
            "MB",
            TARGET_IDLE_MB,
            details={**shared, "rss_mb": [round(s, 1) for s in idle]},
        ),
        Figure(
            "bot_rss_mb_100_inflight",
            median(busy),
            "MB",
            TARGET_INFLIGHT_MB,
            details={**shared, "rss_mb": [round(s, 1) for s in busy], **measured},
        ),
    ]


def main() -> int:
    try:
        with scratch_database("bot") as url:
            figures = asyncio.run(measure(url))
    except Exception as exc:
        figures = [
            Figure(name, None, "MB", None, error=repr(exc))
            for name in ("bot_rss_mb_idle", "bot_rss_mb_100_inflight")
        ]
    return report(figures)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
