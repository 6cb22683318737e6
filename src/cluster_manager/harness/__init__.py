"""Runs on the GPU machine. Imports of this project only `core`, `sandbox` and `telemetry`;
beyond the standard library only torch and numpy, each where it is used and never at module
level; none of the bot's dependencies (tests/test_architecture.py checks the imports).

The runner (`python -m cluster_manager.harness.runner`):

    runner.py        the runner entrypoint, the same on every launcher: a request to a RunResult
    environment.py   what a phase's processes see and the limits they run under
    results.py       the one RunResult of a run's phases, with its verdict and score
    sysinfo.py       the machine that ran it, read without importing torch
    devices.py       which GPUs a run may use: one job per GPU
    cuda_build.py    a CUDA task compiled with nvcc, as the sandbox user
    capture.py       a profile phase's profiler: ncu where the machine has it, else torch's
    ncu.py           Nsight Compute's command line and report
    overrun.py       which of the run's own limits a failed phase ran into
    machine_peaks.py a CPU runner's peaks, measured once and cached

The built-in harness (`python -m cluster_manager.harness.evaluate`):

    evaluate.py      the command line and the loop over a mode's cases
    cases.py         each mode's steps on a case
    case_run.py      one case on its ranks: inputs, checks and timed calls, from here
    paired.py        the timed loop, each call paired with the stand-in moving the same data
    timing.py        the timers and the stop rule
    trusted.py       a case's score: never below the harness's own clock
    cpu_waits.py     the stand-in's waits for a CPU, which its replays leave out
    checks.py        the task's reference, run here on every output
    outcome.py       how a case ends
    reporting.py     the result pipe: popcorn protocol lines
    workers.py       the pipes to the submission's workers and the trusted stand-in
    zygote.py        the fork the workers and the stand-in come from, taken before the seed
    worker.py        the submission's side: one step at a time, as asked
    guard.py         the worker's own syscall filter
    wire.py          how a case's inputs travel to the workers
    frames.py        how large outputs come back
    rawio.py         bytes between memory and a pipe without copies
    output_types.py  outputs of the task's own types, carried as plain data
    tensors.py       walks over nested containers of tensors (`fold`), on both sides
    tracebacks.py    a submission's exception as its author should read it
"""
