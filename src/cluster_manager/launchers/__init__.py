"""One narrow interface to run a request somewhere, one adapter per place.

base.py    `Launcher`: submit, states, result, cancel, attach, follow
local.py   this machine: the runner entrypoint in a child process per run
github/    GitHub Actions: one workflow_dispatch per run, on self-hosted runners
slurm/     Slurm batch jobs on nodes that share a directory with this host
modal.py   Modal: the deployed app's function for the GPU type
"""
