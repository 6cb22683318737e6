# shellcheck shell=bash disable=SC2034
# Helpers shared by setup.sh and stop.sh (sourced, not run).

SLURMCTLD_PID=/run/slurmctld.pid
SLURMD_PID=/run/slurmd.pid
MUNGED_PID=/run/munge/munged.pid

log() { echo "slurm: $*" >&2; }
die() {
  echo "slurm: error: $*" >&2
  exit 1
}

require_root() {
  [[ $(id -u) -eq 0 ]] || die "must run as root (it installs packages and starts daemons)"
}

# The pid in a pid file, if that process is alive and has the expected name (pids get reused).
daemon_pid() {
  local pidfile=$1 name=$2 pid
  [[ -s $pidfile ]] || return 1
  pid=$(<"$pidfile")
  [[ $pid =~ ^[0-9]+$ && -r /proc/$pid/comm ]] || return 1
  [[ $(<"/proc/$pid/comm") == "$name" ]] || return 1
  echo "$pid"
}

# SIGTERM, then SIGKILL after 10 s; only the process named in the pid file.
stop_daemon() {
  local pidfile=$1 name=$2 pid
  pid=$(daemon_pid "$pidfile" "$name") || return 0
  log "stopping $name ($pid)"
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 100); do
    [[ -d /proc/$pid ]] || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}
