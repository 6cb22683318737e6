"""A second measurement of the timing row's kernel, apart from the harness: the task's own
`generate_input` and the submission's `custom_kernel`, timed by triton's `do_bench` (CUDA events
around each call after clearing the L2 cache, as the harness times a call). Prints one JSON
line: the mean and median of the calls, in milliseconds.

    python independent.py TASK_FOLDER SUBMISSION SIZE SEED
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
from pathlib import Path
from types import ModuleType


def load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    task, submission, size, seed = Path(sys.argv[1]), Path(sys.argv[2]), *map(int, sys.argv[3:5])
    import torch
    from triton.testing import do_bench

    reference = load(task / "reference.py", "reference")
    kernel = load(submission, "submission").custom_kernel
    data = reference.generate_input(size=size, seed=seed)
    if error := reference.check_implementation(data, kernel(data)):
        sys.exit(f"the kernel's output is wrong: {error}")
    times = do_bench(lambda: kernel(data), warmup=200, rep=2000, return_mode="all")
    print(
        json.dumps(
            {
                "mean_ms": statistics.fmean(times),
                "median_ms": statistics.median(times),
                "calls": len(times),
                "device": torch.cuda.get_device_name(),
            }
        )
    )


if __name__ == "__main__":
    main()
