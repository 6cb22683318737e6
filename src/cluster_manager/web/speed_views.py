"""The speed of light on a leaderboard's page: what each benchmark case must do and the
fastest it can run on each of the board's GPU types (`core/speed_of_light.py`), and what
share of that a ranked score reaches."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cluster_manager.core import protocol, scoring
from cluster_manager.core.models import Task
from cluster_manager.core.speed_of_light import Peaks, floor_ns
from cluster_manager.rendering.reports import format_duration_ns
from cluster_manager.rendering.speed import percent_text, work_text


@dataclass(frozen=True)
class CaseFloor:
    case: str
    work: str  # "393 kB · 65.5 kFLOP fp16"
    floors: list[tuple[str, str]]  # per GPU type with published peaks: its fastest time


@dataclass(frozen=True)
class SpeedOfLightView:
    bytes: str | None  # the task's formulas
    flops: str | None
    precision: str | None
    cases: list[CaseFloor]
    measured: list[str]  # the board's GPU types without published peaks


def speed_of_light_view(
    task: Task, gpus: Sequence[str], peaks: Mapping[str, Peaks]
) -> SpeedOfLightView | None:
    spec = task.speed_of_light
    if spec is None:
        return None
    cases = [
        CaseFloor(
            protocol.format_case(case),
            work_text(spec, case),
            [
                (gpu, format_duration_ns(floor) if floor > 0 else "—")
                for gpu in gpus
                if gpu in peaks
                for floor in [floor_ns(spec, case, peaks[gpu])]
            ],
        )
        for case in task.benchmarks
    ]
    measured = [g for g in gpus if g not in peaks]
    return SpeedOfLightView(spec.bytes, spec.flops, spec.precision, cases, measured)


def share_text(task: Task, peaks: Peaks | None, score_s: float) -> str:
    """A ranked score's share of the speed of light ("12.3%"), or "" where none is known."""
    share = scoring.share_of_peak(task, peaks, score_s)
    return "" if share is None else percent_text(share)
