"""Settings from the environment and an optional `.env` file, built once in the CLI."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.core.models import Limits
from cluster_manager.core.sealed import KEY_ENV, SealError, parse_key
from cluster_manager.core.telemetry import DEFAULT_THROTTLE_THRESHOLD


@dataclass(frozen=True)
class Settings:
    # Postgres; unset means an embedded server in `data_dir / "postgres"`.
    database_url: str | None = None
    data_dir: Path = Path(".data")
    # The GPU registry file; None means the shipped one (cluster_manager/data/gpus.yml).
    gpus_file: Path | None = None
    # Overrides max_concurrent of the local launcher's GPU types (None: the registry's).
    local_concurrency: int | None = None
    # Submissions per user per hour on a leaderboard: test/benchmark ones, and ranked ones
    # (None: the same); per user per day on all leaderboards, lower for accounts younger than
    # `new_account_days` (0: no such rule).
    rate_limit_per_hour: int = 30
    ranked_rate_limit_per_hour: int | None = None
    daily_quota: int = 500
    new_account_days: int = 0
    new_account_daily_quota: int = 50
    # Quick script runs (`/run`) per user per hour.
    script_rate_limit_per_hour: int = 10
    # GitHub Actions: repository "owner/name", tokens used in rotation, API base URL, branch.
    github_repo: str | None = None
    github_tokens: tuple[str, ...] = ()
    github_api_url: str = "https://api.github.com"
    github_ref: str = "main"
    github_poll_interval_s: float = 5.0
    # Seals GitHub dispatch payloads and result artifacts (core.sealed); the runner repository
    # holds the same key as its secret CLUSTER_MANAGER_PAYLOAD_KEY. Kept out of repr.
    payload_key: str | None = field(default=None, repr=False)
    # Modal: the deployed app's name; used when Modal credentials are present.
    modal_app: str | None = None
    # Slurm: a directory the compute nodes share with this host; unset disables Slurm.
    slurm_dir: Path | None = None
    # The Python on the compute nodes that has this package and torch (default: ours).
    slurm_python: str | None = None
    # Memory cap of local runs (MiB): their cgroup's, else their address space; None: none.
    local_memory_limit_mb: int | None = 8192
    # Writable space of every run (MiB): HOME, TMPDIR, /tmp, /var/tmp, /dev/shm in all.
    run_disk_mb: int = 4096
    compile_timeout_s: float = 120.0
    # The most each benchmark case is timed for (seconds); None: the harness's own cap. Less
    # gives quicker runs and wider error bars, the same on every kernel.
    benchmark_case_s: float | None = None
    # Rank scores of runs the runner could not fully sandbox (core.sandboxing). Off: such a
    # score is stored and shown to its owner and admins, but kept out of the rankings.
    allow_unsandboxed_ranking: bool = False
    # A ranked run whose GPU throttled (heat, power) in more than this share of the samples
    # taken while it was timed is stored but not ranked, and retried once (core.telemetry).
    throttle_threshold: float = DEFAULT_THROTTLE_THRESHOLD
    # HTTP API: where clients reach it (our CLI as a client uses it with `api_token`), the
    # admin token (None: admin API off; kept out of repr), requests per token per minute.
    api_url: str | None = None
    api_token: str | None = field(default=None, repr=False)
    admin_token: str | None = field(default=None, repr=False)
    api_rate_limit_per_minute: int = 120
    # GET /metrics (Prometheus): served (open, for an internal network) or not (404); with a
    # token, only to `Authorization: Bearer <token>` (kept out of repr).
    metrics_enabled: bool = True
    metrics_token: str | None = field(default=None, repr=False)
    # What long-running commands (serve, bot, worker) log, and how: `text` lines or one JSON
    # object per line.
    log_level: int = logging.INFO
    log_format: str = "text"
    # Hours a local run's folder stays after its result is stored (0: removed at once).
    keep_run_folders_hours: float = 0.0


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_FORMATS = ("text", "json")


def _int_or_none(raw: str | None, name: str, default: int | None) -> int | None:
    if raw is None or raw == "":
        return default
    if raw.lower() in {"none", "off", "0"}:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ClusterManagerError(f"{name} must be a whole number, got {raw!r}") from None


def _path_or_none(raw: str | None) -> Path | None:
    return Path(raw) if raw else None


def _tokens(raw: str | None) -> tuple[str, ...]:
    """Comma- or space-separated tokens; they are used in rotation."""
    return tuple(t for t in (raw or "").replace(",", " ").split() if t)


def _payload_key(raw: str | None) -> str | None:
    """The key as configured, checked now so a bad one stops the start, not a dispatch."""
    if not raw or not raw.strip():
        return None
    try:
        parse_key(raw)
    except SealError as exc:
        raise ClusterManagerError(str(exc)) from None
    return raw.strip()


def _seconds(raw: str | None, name: str, default: float) -> float:
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1
    if value <= 0:
        raise ClusterManagerError(f"{name} must be a positive number of seconds, got {raw!r}")
    return value


def _positive_int(raw: str | None, name: str, default: int | None) -> int | None:
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise ClusterManagerError(f"{name} must be a positive whole number, got {raw!r}")
    return value


def _share(raw: str | None, name: str, default: float) -> float:
    """A share between 0 and 1 (0.05 is 5 %)."""
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1
    if not 0 <= value <= 1:
        raise ClusterManagerError(f"{name} must be a share between 0 and 1, got {raw!r}")
    return value


def _flag(raw: str | None, name: str) -> bool:
    text = (raw or "").strip().lower()
    if text in {"", "0", "false", "no", "off"}:
        return False
    if text in {"1", "true", "yes", "on"}:
        return True
    raise ClusterManagerError(f"{name} must be 1 or 0, got {raw!r}")


def _on_off(raw: str | None, name: str, default: bool) -> bool:
    text = (raw or "").strip().lower()
    if not text:
        return default
    if text in {"on", "1", "true", "yes"}:
        return True
    if text in {"off", "0", "false", "no"}:
        return False
    raise ClusterManagerError(f"{name} must be on or off, got {raw!r}")


def _one_of(raw: str | None, name: str, choices: tuple[str, ...], default: str) -> str:
    """One of `choices`, in any case, as the choice is written; unset: `default`."""
    text = (raw or "").strip()
    if not text:
        return default
    found = next((choice for choice in choices if choice.lower() == text.lower()), None)
    if found is None:
        raise ClusterManagerError(f"{name} must be one of {', '.join(choices)}, got {raw!r}")
    return found


def _hours(raw: str | None, name: str, default: float) -> float:
    """A number of hours, 0 or more."""
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1
    if not 0 <= value < float("inf"):
        raise ClusterManagerError(f"{name} must be a number of hours (0 or more), got {raw!r}")
    return value


def _values(environ: Mapping[str, str] | None, dotenv_path: Path | None) -> dict[str, str | None]:
    values: dict[str, str | None] = {}
    if dotenv_path is not None and dotenv_path.is_file():
        from dotenv import dotenv_values  # here: most runs have no `.env` to parse

        values.update(dotenv_values(dotenv_path))
    values.update(os.environ if environ is None else environ)
    return values


def _compile_timeout(values: Mapping[str, str | None], default: float) -> float:
    raw = values.get("CLUSTER_MANAGER_COMPILE_TIMEOUT")
    try:
        return float(raw) if raw else default
    except ValueError:
        raise ClusterManagerError(
            f"CLUSTER_MANAGER_COMPILE_TIMEOUT must be seconds, got {raw!r}"
        ) from None


def load_settings(
    environ: Mapping[str, str] | None = None, dotenv_path: Path | None = Path(".env")
) -> Settings:
    """Environment variables win over `.env`, which wins over the defaults."""
    values = _values(environ, dotenv_path)
    defaults = Settings()
    return Settings(
        database_url=values.get("DATABASE_URL") or None,
        data_dir=Path(values.get("CLUSTER_MANAGER_DATA_DIR") or defaults.data_dir),
        gpus_file=_path_or_none(values.get("CLUSTER_MANAGER_GPUS")),
        local_concurrency=_positive_int(
            values.get("CLUSTER_MANAGER_LOCAL_CONCURRENCY"),
            "CLUSTER_MANAGER_LOCAL_CONCURRENCY",
            None,
        ),
        github_repo=values.get("GITHUB_REPO") or None,
        github_tokens=_tokens(values.get("GITHUB_TOKENS") or values.get("GITHUB_TOKEN")),
        github_api_url=values.get("GITHUB_API_URL") or defaults.github_api_url,
        github_ref=values.get("CLUSTER_MANAGER_GITHUB_REF") or defaults.github_ref,
        github_poll_interval_s=_seconds(
            values.get("GITHUB_POLL_INTERVAL"),
            "GITHUB_POLL_INTERVAL",
            defaults.github_poll_interval_s,
        ),
        payload_key=_payload_key(values.get(KEY_ENV)),
        modal_app=values.get("CLUSTER_MANAGER_MODAL_APP")
        or ("discord-cluster-manager" if values.get("MODAL_TOKEN_ID") else None),
        slurm_dir=_path_or_none(values.get("CLUSTER_MANAGER_SLURM_DIR")),
        slurm_python=values.get("CLUSTER_MANAGER_SLURM_PYTHON") or None,
        **_quotas(values, defaults),
        local_memory_limit_mb=_int_or_none(
            values.get("CLUSTER_MANAGER_LOCAL_MEMORY_MB"),
            "CLUSTER_MANAGER_LOCAL_MEMORY_MB",
            defaults.local_memory_limit_mb,
        ),
        run_disk_mb=_positive_int(
            values.get("CLUSTER_MANAGER_RUN_DISK_MB"), "CLUSTER_MANAGER_RUN_DISK_MB", None
        )
        or defaults.run_disk_mb,
        compile_timeout_s=_compile_timeout(values, defaults.compile_timeout_s),
        benchmark_case_s=_seconds(
            values.get("CLUSTER_MANAGER_BENCHMARK_CASE_S"), "CLUSTER_MANAGER_BENCHMARK_CASE_S", 0
        )
        or None,
        allow_unsandboxed_ranking=_flag(
            values.get("CLUSTER_MANAGER_ALLOW_UNSANDBOXED_RANKING"),
            "CLUSTER_MANAGER_ALLOW_UNSANDBOXED_RANKING",
        ),
        throttle_threshold=_share(
            values.get("CLUSTER_MANAGER_THROTTLE_THRESHOLD"),
            "CLUSTER_MANAGER_THROTTLE_THRESHOLD",
            defaults.throttle_threshold,
        ),
        **_api_settings(values, defaults),
        **_operation_settings(values, defaults),
    )


def _api_settings(values: Mapping[str, str | None], defaults: Settings) -> dict[str, Any]:
    """The HTTP API's settings: the server's URL and token a client uses, the admin token,
    whether and to whom it serves /metrics."""
    return {
        "api_url": (values.get("CLUSTER_MANAGER_API_URL") or "").rstrip("/") or None,
        "api_token": values.get("CLUSTER_MANAGER_TOKEN") or None,
        "admin_token": values.get("CLUSTER_MANAGER_ADMIN_TOKEN") or None,
        "api_rate_limit_per_minute": _positive_int(
            values.get("CLUSTER_MANAGER_API_RATE_LIMIT_PER_MINUTE"),
            "CLUSTER_MANAGER_API_RATE_LIMIT_PER_MINUTE",
            defaults.api_rate_limit_per_minute,
        )
        or defaults.api_rate_limit_per_minute,
        "metrics_enabled": _on_off(
            values.get("CLUSTER_MANAGER_METRICS"),
            "CLUSTER_MANAGER_METRICS",
            defaults.metrics_enabled,
        ),
        "metrics_token": (values.get("CLUSTER_MANAGER_METRICS_TOKEN") or "").strip() or None,
    }


def _operation_settings(values: Mapping[str, str | None], defaults: Settings) -> dict[str, Any]:
    """How a long-running process logs and how long it keeps what its runs leave."""
    return {
        "log_level": getattr(
            logging,
            _one_of(
                values.get("CLUSTER_MANAGER_LOG_LEVEL"),
                "CLUSTER_MANAGER_LOG_LEVEL",
                LOG_LEVELS,
                "INFO",
            ),
        ),
        "log_format": _one_of(
            values.get("CLUSTER_MANAGER_LOG_FORMAT"),
            "CLUSTER_MANAGER_LOG_FORMAT",
            LOG_FORMATS,
            "text",
        ),
        "keep_run_folders_hours": _hours(
            values.get("CLUSTER_MANAGER_KEEP_RUN_FOLDERS_HOURS"),
            "CLUSTER_MANAGER_KEEP_RUN_FOLDERS_HOURS",
            defaults.keep_run_folders_hours,
        ),
    }


def local_limits(settings: Settings) -> Limits:
    """Limits for runs on this machine, from the settings (the registry's GPU types add
    their own: `GpuType.run_limits`)."""
    memory = settings.local_memory_limit_mb
    return Limits(
        compile_timeout=settings.compile_timeout_s,
        memory_bytes=None if memory is None else memory * 1024 * 1024,
        disk_bytes=settings.run_disk_mb * 1024 * 1024,
        benchmark_case_s=settings.benchmark_case_s,
    )


def _quotas(values: Mapping[str, str | None], defaults: Settings) -> dict[str, Any]:
    """The rate limits and quotas, from their variables."""
    return {
        "rate_limit_per_hour": _positive_int(
            values.get("CLUSTER_MANAGER_RATE_LIMIT_PER_HOUR"),
            "CLUSTER_MANAGER_RATE_LIMIT_PER_HOUR",
            defaults.rate_limit_per_hour,
        )
        or defaults.rate_limit_per_hour,
        "ranked_rate_limit_per_hour": _positive_int(
            values.get("CLUSTER_MANAGER_RANKED_RATE_LIMIT_PER_HOUR"),
            "CLUSTER_MANAGER_RANKED_RATE_LIMIT_PER_HOUR",
            None,
        ),
        "daily_quota": _positive_int(
            values.get("CLUSTER_MANAGER_DAILY_QUOTA"),
            "CLUSTER_MANAGER_DAILY_QUOTA",
            defaults.daily_quota,
        )
        or defaults.daily_quota,
        "new_account_days": _int_or_none(
            values.get("CLUSTER_MANAGER_NEW_ACCOUNT_DAYS"),
            "CLUSTER_MANAGER_NEW_ACCOUNT_DAYS",
            defaults.new_account_days,
        )
        or 0,
        "new_account_daily_quota": _positive_int(
            values.get("CLUSTER_MANAGER_NEW_ACCOUNT_DAILY_QUOTA"),
            "CLUSTER_MANAGER_NEW_ACCOUNT_DAILY_QUOTA",
            defaults.new_account_daily_quota,
        )
        or defaults.new_account_daily_quota,
        "script_rate_limit_per_hour": _positive_int(
            values.get("CLUSTER_MANAGER_SCRIPT_RATE_LIMIT_PER_HOUR"),
            "CLUSTER_MANAGER_SCRIPT_RATE_LIMIT_PER_HOUR",
            defaults.script_rate_limit_per_hour,
        )
        or defaults.script_rate_limit_per_hour,
    }
