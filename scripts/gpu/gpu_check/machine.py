"""The machine's facts for the table's header, and the refusal where it has no usable CUDA
device. The standard library only: the refusal comes before anything is installed."""

from __future__ import annotations

import json
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

# What the machine's own Python says of torch and its GPU, as JSON (run in a child: a broken
# torch, or a driver that hangs, must not take the check down with it).
TORCH_PROBE = """
import json, sys
facts = {}
try:
    import torch
except Exception as exc:
    print(json.dumps({"torch_error": f"{type(exc).__name__}: {exc}"}))
    sys.exit(0)
facts["torch"] = torch.__version__
facts["torch_cuda"] = torch.version.cuda
facts["available"] = bool(torch.cuda.is_available())
if facts["available"]:
    facts["device"] = torch.cuda.get_device_name(0)
    facts["capability"] = list(torch.cuda.get_device_capability(0))
    facts["count"] = torch.cuda.device_count()
try:
    import triton
    facts["triton"] = triton.__version__
except Exception:
    facts["triton"] = None
print(json.dumps(facts))
"""
PROBE_TIMEOUT_S = 120


@dataclass(frozen=True)
class Facts:
    nvidia_smi: str | None  # its path; None: not on PATH
    torch: str | None = None  # its version; None: it cannot be imported
    torch_error: str = ""
    torch_cuda: str | None = None  # the CUDA torch was built for
    cuda_available: bool = False
    device: str = ""
    capability: tuple[int, int] | None = None
    device_count: int = 0
    triton: str | None = None
    driver: str = ""
    driver_cuda: str = ""  # the newest CUDA the driver runs (nvidia-smi's header)
    nvcc: str = ""
    ncu: str = ""
    python: str = platform.python_version()


def probe(python: str = sys.executable) -> Facts:
    """What the refusal needs: nvidia-smi on PATH, and torch seeing a CUDA device."""
    found = _torch_facts(python)
    capability = found.get("capability")
    return Facts(
        nvidia_smi=shutil.which("nvidia-smi"),
        torch=found.get("torch"),
        torch_error=found.get("torch_error", ""),
        torch_cuda=found.get("torch_cuda"),
        cuda_available=bool(found.get("available")),
        device=found.get("device", ""),
        capability=(int(capability[0]), int(capability[1])) if capability else None,
        device_count=int(found.get("count", 0)),
        triton=found.get("triton"),
    )


def _torch_facts(python: str) -> dict[str, Any]:
    try:
        done = subprocess.run(
            [python, "-c", TORCH_PROBE],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
        facts: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        return {"torch_error": f"importing it took over {PROBE_TIMEOUT_S} s"}
    except (OSError, ValueError, IndexError) as exc:
        return {"torch_error": f"{python} could not say: {exc}"}
    return facts


def refusal(facts: Facts) -> str | None:
    """One line saying why this machine cannot run the check, or None when it can."""
    reasons = []
    if facts.nvidia_smi is None:
        reasons.append("nvidia-smi is not on PATH")
    if facts.torch is None:
        reasons.append(f"torch cannot be imported ({facts.torch_error})")
    elif not facts.cuda_available:
        reasons.append(f"torch {facts.torch} sees no CUDA device (torch.cuda.is_available())")
    if not reasons:
        return None
    return "gpu check refused: no usable CUDA device: " + "; ".join(reasons)


def with_versions(facts: Facts) -> Facts:
    """The driver's, nvcc's and ncu's versions added (once the machine passed the refusal)."""
    query = _output(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    cuda = re.search(r"CUDA Version:\s*([\d.]+)", _output(["nvidia-smi"]))
    nvcc = re.search(r"release ([\d.]+)", _output(["nvcc", "--version"]))
    ncu = re.search(r"Version ([\d.]+)", _output(["ncu", "--version"]))
    return replace(
        facts,
        driver=query.splitlines()[0].strip() if query.strip() else "",
        driver_cuda=cuda.group(1) if cuda else "",
        nvcc=nvcc.group(1) if nvcc else "",
        ncu=ncu.group(1) if ncu else "",
    )


def _output(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout


def header(facts: Facts, bwrap: str, now: datetime | None = None) -> list[tuple[str, str]]:
    """The table's first lines: what ran where (no host name)."""
    when = (now or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    cc = ".".join(map(str, facts.capability)) if facts.capability else "?"
    return [
        ("date", when),
        ("device", f"{facts.device or '?'} (×{facts.device_count}, compute capability {cc})"),
        ("driver", f"{facts.driver or '?'} (CUDA {facts.driver_cuda or '?'})"),
        ("CUDA", f"torch built for {facts.torch_cuda or '?'}, nvcc {facts.nvcc or 'not found'}"),
        ("torch", f"{facts.torch}, triton {facts.triton or 'not found'}, Python {facts.python}"),
        ("ncu", facts.ncu or "not found"),
        ("bwrap", bwrap),
    ]


def bwrap_line(environ: dict[str, str]) -> str:
    """Which bubblewrap the sandbox rows use, as the runner finds it, and where it came from
    (the check script says when it unpacked the carried .deb)."""
    chosen = environ.get("CLUSTER_MANAGER_BWRAP", "bwrap")
    if chosen == "off":
        return "off (CLUSTER_MANAGER_BWRAP=off): sandboxes are partial"
    path = shutil.which(chosen)
    if path is None:
        return f"{chosen} not found: sandboxes are partial"
    version = _output([path, "--version"]).strip() or "its --version failed"
    source = environ.get("GPU_CHECK_BWRAP_FROM", "")
    return f"{path} ({version}{'; ' + source if source else ''})"
