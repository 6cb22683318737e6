#!/usr/bin/env bash
# Stops the loopback Slurm cluster started by setup.sh: slurmd, slurmctld, then munged.
# Jobs still running are left to their slurmstepd (scancel them first); state dirs are kept.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$HERE/lib.sh"

require_root
stop_daemon "$SLURMD_PID" slurmd
stop_daemon "$SLURMCTLD_PID" slurmctld
stop_daemon "$MUNGED_PID" munged
