"""What a run sends back: each phase's tests and benchmarks, the build, the verdict and the
score, in the plain-JSON form that travels from the runner to the bot and is stored."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cluster_manager.core.json_forms import plain_json
from cluster_manager.core.models import RunMode, Verdict, run_mode
from cluster_manager.core.profiling import ProfilerOutcome
from cluster_manager.core.speed_of_light import CaseSpeed
from cluster_manager.core.telemetry import PhaseTelemetry, telemetry_from_json

RUN_RESULT_VERSION = 1


@dataclass(frozen=True)
class TestOutcome:
    index: int
    spec: str
    passed: bool
    error: str = ""
    message: str = ""


@dataclass(frozen=True)
class BenchmarkOutcome:
    """Timings in nanoseconds, as the popcorn protocol reports them."""

    index: int
    spec: str
    passed: bool
    runs: int = 0
    mean: float = 0.0
    std: float = 0.0
    err: float = 0.0
    best: float = 0.0
    worst: float = 0.0
    error: str = ""
    report: str = ""
    skipped: bool = False  # never run: an earlier case failed and the run stopped there
    trace: str = ""  # profile mode: the profiler's Chrome trace, gzipped, base64
    speed: CaseSpeed | None = None  # against the speed of light: set by the runner, not a main


@dataclass(frozen=True)
class CompileOutcome:
    success: bool
    command: tuple[str, ...]
    output: str
    duration_s: float


@dataclass(frozen=True)
class PhaseOutcome:
    """One run of the task's main: `python MAIN MODE TESTS_FILE`."""

    name: str  # the popcorn mode this phase ran
    exit_code: int | None
    timed_out: bool
    duration_s: float
    stdout: str
    stderr: str
    verdict: Verdict
    message: str
    tests: tuple[TestOutcome, ...] = ()
    benchmarks: tuple[BenchmarkOutcome, ...] = ()
    profiler: ProfilerOutcome | None = None  # profile mode: which profiler, and its report


@dataclass(frozen=True)
class RunResult:
    passed: bool
    verdict: Verdict
    mode: RunMode
    message: str
    phases: tuple[PhaseOutcome, ...] = ()
    compilation: CompileOutcome | None = None
    score: float | None = None  # seconds, lower is better; ranked mode only
    system: dict[str, Any] = field(default_factory=dict)
    review: str = ""  # why the score is held for an admin's review instead of being ranked
    durations: dict[str, float] = field(default_factory=dict)
    # Per timed phase, what its GPU did (core.telemetry); absent in older runners' results.
    telemetry: dict[str, PhaseTelemetry] = field(default_factory=dict)
    # Set by the bot when it stores a ranked run whose GPU throttled (storage.throttling): why
    # it is not ranked. A secret run's author reads only that it is held (service.rules).
    throttled: str = ""
    version: int = RUN_RESULT_VERSION

    @property
    def tests(self) -> tuple[TestOutcome, ...]:
        return tuple(t for p in self.phases for t in p.tests)

    @property
    def benchmarks(self) -> tuple[BenchmarkOutcome, ...]:
        return tuple(b for p in self.phases for b in p.benchmarks)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = plain_json(self)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunResult:
        version = data.get("version")
        if version != RUN_RESULT_VERSION:
            raise ValueError(f"unsupported run result version {version!r}")
        compilation = data.get("compilation")
        return cls(
            passed=bool(data["passed"]),
            verdict=Verdict(data["verdict"]),
            mode=run_mode(data["mode"]),
            message=data.get("message", ""),
            phases=tuple(
                PhaseOutcome(
                    **{
                        **p,
                        "verdict": Verdict(p["verdict"]),
                        "tests": tuple(TestOutcome(**t) for t in p.get("tests", ())),
                        "benchmarks": tuple(_benchmark(b) for b in p.get("benchmarks", ())),
                        "profiler": _profiler(p.get("profiler")),
                    }
                )
                for p in data.get("phases", ())
            ),
            compilation=None
            if compilation is None
            else CompileOutcome(**{**compilation, "command": tuple(compilation["command"])}),
            score=data.get("score"),
            system=dict(data.get("system", {})),
            review=str(data.get("review", "")),
            durations=dict(data.get("durations", {})),
            telemetry=telemetry_from_json(data.get("telemetry")),
            throttled=str(data.get("throttled", "")),
            version=version,
        )


def _profiler(data: dict[str, Any] | None) -> ProfilerOutcome | None:
    return None if data is None else ProfilerOutcome.from_json(data)


def _benchmark(data: dict[str, Any]) -> BenchmarkOutcome:
    return BenchmarkOutcome(**{**data, "speed": CaseSpeed.from_json(data.get("speed"))})
