"""GPU telemetry on the GPU machine: probes of the device a run uses, sampled in a thread of
the runner while the task's main is timed (never in the submission's process).

    probes.py    `GpuProbe`, the one interface to a vendor's library; `NoProbe` says why none
    nvml.py      NVIDIA GPUs through NVML
    amd.py       AMD GPUs through AMD SMI
    choice.py    which probe a runner opens (CLUSTER_MANAGER_GPU_PROBE)
    sampler.py   a probe sampled in a daemon thread while a phase runs
    recorder.py  a run's telemetry: the probe opened at the first timed phase, closed at the end
    summary.py   a phase's samples summed up as the RunResult carries them
"""
