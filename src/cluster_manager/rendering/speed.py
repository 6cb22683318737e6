"""Speed-of-light figures as people read them (`core/speed_of_light.py` computes them): the
text report's table, a one-line summary for a chat message, and the cells of the pages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cluster_manager.core.formulas import FormulaError
from cluster_manager.core.run_results import BenchmarkOutcome
from cluster_manager.core.speed_of_light import CaseSpeed, SpeedOfLight

NONE = "—"
_PREFIXES = (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))


def si_text(value: float, unit: str) -> str:
    """`3.35e12, "B/s"` -> "3.35 TB/s": three figures, the largest prefix that fits."""
    rounded = float(f"{value:.3g}")  # 999.96 GB/s is shown as 1 TB/s
    for prefix, scale in _PREFIXES:
        if rounded >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def work_text(spec: SpeedOfLight, case: Mapping[str, object]) -> str:
    """What a case must do: "393 kB · 65.5 kFLOP fp16" (a dash where a formula fails)."""
    try:
        nbytes, flops = spec.work(case)
    except FormulaError:
        return NONE
    parts = [si_text(nbytes, "B")] if spec.bytes else []
    if spec.flops:
        parts.append(f"{si_text(flops, 'FLOP')} {spec.precision}")
    return " · ".join(parts)


def percent_text(fraction: float) -> str:
    return f"{fraction * 100:.1f}%" if fraction >= 1 else f"{fraction * 100:.3g}%"


def bandwidth_text(speed: CaseSpeed) -> str:
    return si_text(speed.bandwidth_gbs * 1e9, "B/s") if speed.bytes > 0 else NONE


def flop_rate_text(speed: CaseSpeed, *, precision: bool = True) -> str:
    """The achieved FLOP rate, with its precision ("9.85 GFLOP/s fp32") unless told not to."""
    if speed.flops <= 0:
        return NONE
    rate = si_text(speed.tflops * 1e12, "FLOP/s")
    return f"{rate} {speed.precision}" if precision and speed.precision else rate


def share_text(speed: CaseSpeed) -> str:
    """Its fraction of the roofline and which peak binds it ("31.4% memory"), or a dash."""
    fraction = speed.fraction
    return NONE if fraction is None else f"{percent_text(fraction)} {speed.bound}"


def peaks_text(speed: CaseSpeed) -> str:
    """The peaks a case was measured against, and where they come from."""
    parts = []
    if speed.peak_gbs:
        parts.append(si_text(speed.peak_gbs * 1e9, "B/s"))
    if speed.peak_tflops:
        parts.append(f"{speed.precision} {si_text(speed.peak_tflops * 1e12, 'FLOP/s')}")
    if not parts:
        return "no peaks known for this GPU type: achieved rates only"
    where = (
        "this machine's, measured: not a ceiling"
        if speed.measured_peaks
        else "the GPU type's published"
    )
    return f"peaks ({where}): {', '.join(parts)}"


def speed_summary(speed: CaseSpeed) -> str:
    """One line: "812 GB/s · 24.2% of peak (memory)" (a chat message's, say)."""
    rates = [t for t in (bandwidth_text(speed), flop_rate_text(speed)) if t != NONE]
    fraction = speed.fraction
    if fraction is not None:
        rates.append(f"{percent_text(fraction)} of peak ({speed.bound})")
    return " · ".join(rates)


def speed_table(benchmarks: Sequence[BenchmarkOutcome], width: int) -> list[str]:
    """The report's table of the timed cases that have figures: one row a case (a line for
    the name and one for the figures where they do not fit `width`), then the peaks."""
    speeds = [(b.spec, b.speed) for b in benchmarks if b.speed is not None]
    if not speeds:
        return []
    first = speeds[0][1]
    header = (
        "bandwidth",
        f"FLOP rate{f' ({first.precision})' if first.precision else ''}",
        "of peak",
    )
    rows = [
        (bandwidth_text(s), flop_rate_text(s, precision=False), share_text(s)) for _, s in speeds
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    case_width = max(len("case"), *(len(spec) for spec, _ in speeds))
    inline = 2 + case_width + 2 + sum(widths) + 2 * (len(widths) - 1) <= width

    def cells(row: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()

    lines = [f"  {'case'.ljust(case_width)}  {cells(header)}" if inline else "  case"]
    if not inline:
        lines.append(f"      {cells(header)}")
    for (spec, _), row in zip(speeds, rows, strict=True):
        lines += (
            [f"  {spec.ljust(case_width)}  {cells(row)}"]
            if inline
            else [
                f"  {spec}",
                f"      {cells(row)}",
            ]
        )
    return [*lines, f"  {peaks_text(first)}"]
