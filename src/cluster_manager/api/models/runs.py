"""A run as the API shows it: its verdict and score, and where the caller may read them, its
outcome in the popcorn protocol's keys, what it printed, the whole RunResult, and each timed
case against the speed of light. A secret run shows its verdict and nothing derived from its
inputs (no result, no diagnostics, no score figures)."""

from __future__ import annotations

from typing import Any

from cluster_manager.api.models.base import ApiModel, Moment, left_out_when_none
from cluster_manager.core.models import Mode, Verdict
from cluster_manager.core.records import Job, RunRecord
from cluster_manager.core.run_results import RunResult
from cluster_manager.service.port import StoredSubmission

# The run's outcome as the popcorn protocol's `key: value` pairs (`test.0.status: pass`),
# values as the protocol writes them and the counts as numbers (popcorn-cli reads integers).
KeyForm = dict[str, str | int]


def key_form(result: RunResult) -> KeyForm:
    keys: KeyForm = {}
    if result.tests:
        keys["test-count"] = len(result.tests)
    for t in result.tests:
        prefix = f"test.{t.index}."
        keys |= {prefix + "spec": t.spec, prefix + "status": "pass" if t.passed else "fail"}
        if t.message:
            keys[prefix + "message"] = t.message
        if t.error:
            keys[prefix + "error"] = t.error
    if result.benchmarks:
        keys["benchmark-count"] = len(result.benchmarks)
    for b in result.benchmarks:
        prefix = f"benchmark.{b.index}."
        keys |= {prefix + "spec": b.spec, prefix + "status": "pass" if b.passed else "fail"}
        if b.passed:
            keys |= {
                prefix + k: repr(float(getattr(b, k))) for k in ("mean", "err", "best", "worst")
            }
        if b.error:
            keys[prefix + "error"] = b.error
    keys["check"] = "pass" if result.passed else "fail"
    return keys


class CompilationView(ApiModel):
    success: bool
    stdout: str
    stderr: str


class Diagnostics(ApiModel):
    """What the main phase printed and how it ended; the compiler's output, if it ran."""

    stdout: str
    stderr: str
    exit_code: int | None
    success: bool
    duration: float
    message: str
    compilation: CompilationView | None

    @classmethod
    def of(cls, result: RunResult) -> Diagnostics:
        phase = result.phases[-1] if result.phases else None
        compiled = result.compilation
        return cls(
            stdout=phase.stdout if phase else "",
            stderr=phase.stderr if phase else "",
            exit_code=phase.exit_code if phase else None,
            success=result.passed,
            duration=sum(p.duration_s for p in result.phases),
            message=result.message,
            compilation=None
            if compiled is None
            else CompilationView(success=compiled.success, stdout="", stderr=compiled.output),
        )


class CaseSpeedView(ApiModel):
    """A timed case against the speed of light (`core.speed_of_light.CaseSpeed`): its work,
    what it achieved, the peaks it is held to, and the fraction of peak of the one that
    binds it (`bound`, null without peaks)."""

    phase: str
    index: int
    spec: str
    bytes: float
    flops: float
    precision: str | None
    bandwidth_gbs: float
    tflops: float
    peak_gbs: float | None
    peak_tflops: float | None
    measured_peaks: bool
    fraction_of_peak: float | None
    bound: str | None

    @classmethod
    def all_of(cls, result: RunResult) -> list[CaseSpeedView]:
        """Each timed case's figures; [] when the task states no speed of light."""
        return [
            cls(phase=phase.name, index=b.index, spec=b.spec, **b.speed.to_json())
            for phase in result.phases
            for b in phase.benchmarks
            if b.speed is not None
        ]


class RunView(ApiModel):
    """A run of `GET /user/submissions/{id}`. Where the caller may read its result (not a
    redacted secret run), `result`, `diagnostics`, `run_result` and `speed_of_light` are
    there; a redacted run shows at most `held`: that it is held, never why."""

    job_id: int
    start_time: Moment | None
    end_time: Moment
    mode: Mode
    secret: bool
    runner: str
    gpu_type: str
    verdict: Verdict
    score: float | None
    passed: bool
    redacted: bool
    result: KeyForm | None = left_out_when_none()
    diagnostics: Diagnostics | None = left_out_when_none()
    # The RunResult whole (its own versioned JSON): a client renders its own report.
    run_result: dict[str, Any] | None = left_out_when_none()
    speed_of_light: list[CaseSpeedView] | None = left_out_when_none()
    held: str | None = left_out_when_none()

    @classmethod
    def of(cls, run: RunRecord, job: Job | None) -> RunView:
        readable: dict[str, Any] = {}
        if run.result and not run.redacted:
            result = RunResult.from_json(run.result)
            readable = {
                "result": key_form(result),
                "diagnostics": Diagnostics.of(result),
                "run_result": run.result,
                "speed_of_light": CaseSpeedView.all_of(result),
            }
        elif run.result.get("held"):
            readable = {"held": run.result["held"]}
        return cls(
            job_id=run.job_id,
            start_time=job.dispatched_at if job else None,
            end_time=run.created_at,
            mode=run.mode,
            secret=run.secret,
            runner=run.gpu,
            gpu_type=run.gpu,
            verdict=run.verdict,
            score=run.score,
            passed=run.passed,
            redacted=run.redacted,
            **readable,
        )

    def to_record(self, submission: StoredSubmission) -> RunRecord:
        """The run as `Service.submissions.report` has it: the whole RunResult where the caller
        may read it, else only that it is held."""
        result = self.run_result or ({"held": self.held} if self.held else {})
        return RunRecord(
            job_id=self.job_id,
            submission_id=submission.id,
            leaderboard=submission.leaderboard,
            user=submission.user,
            gpu=self.gpu_type,
            mode=self.mode,
            secret=self.secret,
            passed=self.passed,
            verdict=self.verdict,
            score=self.score,
            file_name=submission.file_name,
            submitted_at=submission.submitted_at,
            created_at=self.end_time,
            result=result,
            redacted=self.redacted,
        )
