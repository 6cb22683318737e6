"""GPU telemetry on the GPU machine: probes of the device a run uses, sampled in a thread of
the runner while the task's main is timed (never in the submission's process)."""
