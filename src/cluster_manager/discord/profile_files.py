"""Nsight Compute's reports of a profile submission, attached to its Discord report so that
they open in Nsight Compute's UI (the HTTP API puts them in the profile's zip instead)."""

from __future__ import annotations

import base64
import binascii
import io
import re

import discord

from cluster_manager.core.models import Mode
from cluster_manager.core.run_results import RunResult
from cluster_manager.service import SubmissionReport

# Discord refuses a message whose files pass 10 MiB (unboosted servers): the log goes too.
ATTACHMENT_BUDGET = 8 << 20
REPORT_NAME = "profile.ncu-rep"  # the name ProfilerOutcome.summary() tells the reader


def ncu_reports(report: SubmissionReport) -> list[tuple[str, bytes]]:
    """(file name, .ncu-rep) of each public profile run that brought one back, within the
    budget; a run's name carries its GPU when there are several."""
    return _within_budget(report)[0]


def left_out(report: SubmissionReport) -> set[str]:
    """The GPUs whose Nsight Compute report is over the attachment budget."""
    return _within_budget(report)[1]


def _within_budget(report: SubmissionReport) -> tuple[list[tuple[str, bytes]], set[str]]:
    found: list[tuple[str, bytes]] = []
    for run in report.runs:
        if run.secret or run.mode is not Mode.PROFILE or not run.result:
            continue
        for phase in RunResult.from_json(run.result).phases:
            if phase.profiler is None or not phase.profiler.report:
                continue
            try:
                data = base64.b64decode(phase.profiler.report, validate=True)
            except (binascii.Error, ValueError):
                continue  # a runner's garbled report: the log says what was captured
            found.append((run.gpu, data))
    kept, dropped, total = [], set(), 0
    for gpu, data in found:
        if total + len(data) <= ATTACHMENT_BUDGET:
            kept.append((_name(gpu, len(found)), data))
            total += len(data)
        else:
            dropped.add(gpu)
    return kept, dropped


def report_files(report: SubmissionReport) -> list[discord.File]:
    return [discord.File(io.BytesIO(data), filename=name) for name, data in ncu_reports(report)]


def _name(gpu: str, count: int) -> str:
    if count == 1:
        return REPORT_NAME
    return f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', gpu)}.{REPORT_NAME}"
