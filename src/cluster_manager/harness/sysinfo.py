"""What machine ran the job, read without importing torch (that alone costs seconds)."""

from __future__ import annotations

import importlib.util
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any


def _torch_versions() -> dict[str, str | None]:
    """Reads torch's generated `version.py` as text: version, CUDA and HIP it was built for."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return {"torch": None, "cuda": None, "hip": None}
    text = ""
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "version.py"
        if candidate.is_file():
            text = candidate.read_text(errors="replace")
            break
    found = {}
    for key in ("__version__", "cuda", "hip"):
        match = re.search(rf"^{key}\s*(?::\s*[\w\[\]|. ]+)?=\s*'([^']*)'", text, re.M)
        found[key] = match[1] if match else None
    return {"torch": found["__version__"], "cuda": found["cuda"], "hip": found["hip"]}


def _query(command: list[str]) -> str | None:
    if shutil.which(command[0]) is None:
        return None
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def system_info() -> dict[str, Any]:
    gpus = _query(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])
    if gpus is None:
        rocm = _query(["rocm-smi", "--showproductname", "--csv"])
        gpus = None if rocm is None else "\n".join(rocm.splitlines()[1:])
    devices = [g.strip() for g in (gpus or "").splitlines() if g.strip()]
    return {
        "device": devices[0] if devices else "CPU",
        "device_count": len(devices),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        **_torch_versions(),
    }
