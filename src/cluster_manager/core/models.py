"""The data contracts of the evaluation engine: tasks and run requests (what comes back:
`run_results.py`).

Everything here is a frozen dataclass or an enum with a plain-JSON form, because the same
objects travel between the bot host, the launchers and the runner on the GPU machine.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cluster_manager.core.json_forms import plain_json
from cluster_manager.core.profiling import ProfileOptions
from cluster_manager.core.speed_of_light import Peaks, SpeedOfLight

RUN_REQUEST_VERSION = 1

# A test case: parameter name -> value, as the public problem sets write them: an integer, a
# boolean, a word, or a list of those (core/protocol.py has the grammar).
CaseScalar = int | bool | str
CaseValue = CaseScalar | list[CaseScalar]
Case = dict[str, CaseValue]


# In a stored task's JSON: its cases' keys in the task's own order.
CASE_KEYS = "case_keys"


def case_keys(cases: Iterable[Case]) -> list[str]:
    """Every key of the cases, in the order the task first wrote each."""
    return list(dict.fromkeys(key for case in cases for key in case))


def in_key_order(case: Case, keys: Sequence[str]) -> Case:
    """`case` with its keys in `keys`' order (any others after them, as they were)."""
    return {**{k: case[k] for k in keys if k in case}, **case}


class Language(enum.StrEnum):
    PYTHON = "py"
    CUDA = "cu"


class Mode(enum.StrEnum):
    """What a submission asks for. `LEADERBOARD` is the ranked mode."""

    TEST = "test"
    BENCHMARK = "benchmark"
    LEADERBOARD = "leaderboard"
    PROFILE = "profile"


# What a submission is when its mode goes unsaid: trying a file must not rank it (a ranked
# run spends the ranked quota and a secret re-run), as popcorn-cli never does unasked.
DEFAULT_SUBMIT_MODE = Mode.TEST


class ScriptMode(enum.StrEnum):
    """A `/run` script: the file runs as-is (an experiment); it is never a submission, so
    never stored or ranked, and no submission path can ask for it."""

    SCRIPT = "script"


# What a runner is asked to do, and the mode string a task's main is given for a phase.
RunMode = Mode | ScriptMode


def run_mode(value: str) -> RunMode:
    return ScriptMode(value) if value == ScriptMode.SCRIPT else Mode(value)


class RankingBy(enum.StrEnum):
    LAST = "last"
    MEAN = "mean"
    GEOM = "geom"


class Verdict(enum.StrEnum):
    PASSED = "passed"
    WRONG_ANSWER = "wrong_answer"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    INTERNAL_ERROR = "internal_error"
    # No run reports it: how a secret run's failure shows to its author, its kind withheld.
    FAILED = "failed"


SUBMISSION_SOURCE = "@SUBMISSION@"


@dataclass(frozen=True)
class TaskFile:
    """A file placed in the run directory. `content` is None for the submission's slot."""

    name: str
    content: str | None

    @property
    def is_submission(self) -> bool:
        return self.content is None


@dataclass(frozen=True)
class CudaConfig:
    sources: tuple[str, ...]
    include_dirs: tuple[str, ...] = ()
    defines: dict[str, str] = field(default_factory=dict)
    compile_flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Task:
    name: str
    lang: Language
    files: tuple[TaskFile, ...]
    tests: tuple[Case, ...]
    benchmarks: tuple[Case, ...]
    # Python: the task's own eval harness; None means the built-in harness.
    main: str | None = None
    cuda: CudaConfig | None = None
    templates: dict[str, str] = field(default_factory=dict)
    test_timeout: float = 180.0
    benchmark_timeout: float = 180.0
    ranked_timeout: float = 180.0
    ranking_by: RankingBy = RankingBy.LAST
    multi_gpu: bool = False
    description: str = ""
    # Per benchmark, the fastest time physically possible (µs), or None: a ranked mean below
    # it is held for an admin's review instead of being ranked (a shortcut, not a kernel).
    floors_us: tuple[float | None, ...] = ()
    # What each benchmark case must do at the least (task.yml's `speed_of_light`), or None.
    speed_of_light: SpeedOfLight | None = None

    @property
    def submission_name(self) -> str:
        return next(f.name for f in self.files if f.is_submission)

    @property
    def processes(self) -> int:
        """How many processes (one per device) its largest case runs: its `world_size`."""
        sizes = [c.get("world_size") for c in (*self.tests, *self.benchmarks)]
        ints = [s for s in sizes if isinstance(s, int) and not isinstance(s, bool)]
        return max(ints, default=1) if self.multi_gpu else 1

    def timeout_for(self, phase_mode: RunMode) -> float:
        """One timeout model: every phase's limit comes from the task."""
        match phase_mode:
            case Mode.TEST | ScriptMode.SCRIPT:
                return self.test_timeout
            case Mode.BENCHMARK | Mode.PROFILE:
                return self.benchmark_timeout
            case Mode.LEADERBOARD:
                return self.ranked_timeout
        raise ValueError(f"no phase mode {phase_mode!r}")

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = plain_json(self)
        return data

    def to_stored_json(self) -> dict[str, Any]:
        """`to_json` for a store that may reorder an object's keys (Postgres's JSONB does):
        with the order the task wrote its cases' keys in, the order every spec shows."""
        return {**self.to_json(), CASE_KEYS: case_keys((*self.tests, *self.benchmarks))}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Task:
        cuda = data.get("cuda")
        keys = data.get(CASE_KEYS, ())
        return cls(
            name=data["name"],
            lang=Language(data["lang"]),
            files=tuple(TaskFile(**f) for f in data["files"]),
            tests=tuple(in_key_order(c, keys) for c in data["tests"]),
            benchmarks=tuple(in_key_order(c, keys) for c in data["benchmarks"]),
            main=data.get("main"),
            cuda=None
            if cuda is None
            else CudaConfig(
                sources=tuple(cuda["sources"]),
                include_dirs=tuple(cuda.get("include_dirs", ())),
                defines=dict(cuda.get("defines", {})),
                compile_flags=tuple(cuda.get("compile_flags", ())),
            ),
            templates=dict(data.get("templates", {})),
            test_timeout=float(data.get("test_timeout", 180)),
            benchmark_timeout=float(data.get("benchmark_timeout", 180)),
            ranked_timeout=float(data.get("ranked_timeout", 180)),
            ranking_by=RankingBy(data.get("ranking_by", "last")),
            multi_gpu=bool(data.get("multi_gpu", False)),
            description=data.get("description", ""),
            floors_us=tuple(data.get("floors_us", ())),
            speed_of_light=SpeedOfLight.from_json(data.get("speed_of_light")),
        )


@dataclass(frozen=True)
class Limits:
    """Resource limits applied to the task's main process and everything it starts."""

    compile_timeout: float = 120.0
    output_bytes: int = 16 * 1024
    # Memory of the run's trees, every kind counted (a cgroup), where the runner can; else
    # their address space on a machine without GPUs (drivers map huge ranges). None: uncapped.
    memory_bytes: int | None = None
    file_bytes: int = 1 << 30  # the largest file the task may write
    # The run's writable space in all (HOME, TMPDIR, /tmp, /var/tmp, /dev/shm; memory, too).
    disk_bytes: int = 4096 << 20
    open_files: int = 4096
    processes: int | None = None  # threads included; None: the runner's default for the host
    # Extra seconds a phase may take beyond the task's timeout for process start-up.
    grace: float = 0.0
    # The longest one benchmark case is timed; None: the harness's own cap (3 s).
    benchmark_case_s: float | None = None


@dataclass(frozen=True)
class RunRequest:
    """Everything the runner entrypoint needs; nothing else is read on the GPU machine."""

    task: Task
    submission_name: str
    submission_code: str
    mode: RunMode
    secret_seed: int | None = field(default=None, repr=False)  # never in a log line
    limits: Limits = field(default_factory=Limits)
    gpu_count: int = 1
    # The GPU type's compiler target from the registry (sm_90a, gfx942); None: the toolchain's
    # default (CPU, or a type without `arch:`).
    arch: str | None = None
    profile: ProfileOptions = field(default_factory=ProfileOptions)  # profile mode only
    peaks: Peaks | None = None  # the GPU type's published peaks (gpus.yml), for speed of light

    @classmethod
    def of_submission(
        cls,
        task: Task,
        code: str,
        mode: Mode,
        limits: Limits,
        secret_seed: int | None = None,
        *,
        arch: str | None = None,
        profile: ProfileOptions | None = None,
        peaks: Peaks | None = None,
    ) -> RunRequest:
        """A submission's run: it fills the task's slot, only a ranked run gets a seed, and a
        multi-GPU task gets one device per rank of its largest case (POPCORN_GPUS)."""
        return cls(
            task=task,
            submission_name=task.submission_name,
            submission_code=code,
            mode=mode,
            secret_seed=secret_seed if mode is Mode.LEADERBOARD else None,
            limits=limits,
            gpu_count=task.processes,
            arch=arch,
            profile=profile or ProfileOptions(),
            peaks=peaks,
        )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = plain_json(self)
        data["version"] = RUN_REQUEST_VERSION
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRequest:
        version = data.get("version")
        if version != RUN_REQUEST_VERSION:
            raise ValueError(f"unsupported run request version {version!r}")
        return cls(
            task=Task.from_json(data["task"]),
            submission_name=data["submission_name"],
            submission_code=data["submission_code"],
            mode=run_mode(data["mode"]),
            secret_seed=data.get("secret_seed"),
            limits=Limits(**data.get("limits", {})),
            gpu_count=int(data.get("gpu_count", 1)),
            arch=data.get("arch"),
            profile=ProfileOptions.from_json(data.get("profile")),
            peaks=Peaks.from_json(data.get("peaks")),
        )
