#!/usr/bin/env bash
# Brings up a one-node Slurm cluster on loopback: munge, slurmctld and slurmd on this machine,
# node `localhost`, partition `debug`. Idempotent: when everything is up it only checks.
# Needs root (Debian 12). SLURM_SETUP_WAIT bounds the wait for the node (default 60 s).
set -euo pipefail
# The daemons live in sbin, which a non-login root shell may not have on its PATH.
export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$HERE/lib.sh"

CONF=/etc/slurm/slurm.conf
NODE=localhost
WAIT_S="${SLURM_SETUP_WAIT:-60}"
PACKAGES=(munge slurmctld slurmd slurm-client)
APT_LOG=/var/log/slurm-setup-apt.log

lock() {
  # Parallel test workers may all call this at once. Daemons get `9>&-`: they must not
  # inherit the lock, or it would be held for as long as they run.
  exec 9>/run/lock/cm-slurm-setup.lock
  flock -w 600 9 || die "another setup.sh is still running"
}

have_packages() {
  local cmd
  for cmd in munged mungekey slurmctld slurmd sinfo sbatch squeue scancel scontrol; do
    command -v "$cmd" >/dev/null || return 1
  done
}

apt_install() {
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "${PACKAGES[@]}" >>"$APT_LOG" 2>&1
}

install_packages() {
  have_packages && return 0
  log "installing ${PACKAGES[*]} (log: $APT_LOG)"
  # Package lists are refreshed only when needed: apt-get update is the slow part.
  if ! apt_install; then
    log "install failed; refreshing the package lists and retrying"
    apt-get update -q >>"$APT_LOG" 2>&1 || die "apt-get update failed (see $APT_LOG)"
    apt_install || die "cannot install ${PACKAGES[*]} (see $APT_LOG)"
  fi
  have_packages || die "packages installed but Slurm/munge commands are missing"
}

ensure_munge_key() {
  local key=/etc/munge/munge.key
  [[ -s $key ]] && return 0
  log "creating $key"
  install -d -o munge -g munge -m 0700 /etc/munge
  mungekey --create --keyfile="$key" || die "cannot create $key"
  chown munge:munge "$key"
  chmod 0400 "$key"
}

munge_works() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munged() {
  munge_works && return 0
  log "starting munged"
  install -d -o munge -g munge -m 0755 /run/munge
  install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
  # --force on the retry clears a socket left by a munged that was killed.
  runuser -u munge -- munged 9>&- 2>/dev/null || runuser -u munge -- munged --force 9>&- ||
    die "munged did not start (see /var/log/munge/munged.log)"
  wait_until 10 munge_works || die "munged started but munge credentials do not verify"
}

render_conf() {
  local cpus mem_mib
  cpus=$(nproc)
  # 80% of the RAM (what `free -m` shows), in whole GiB: a node claiming more than it has is
  # drained. /proc/meminfo rather than free: procps is not in every minimal image.
  mem_mib=$(awk '/^MemTotal:/ { print int($2 / 1024 * 0.8 / 1024) * 1024 }' /proc/meminfo)
  ((mem_mib >= 1024)) || mem_mib=$(awk '/^MemTotal:/ { print int($2 / 1024 / 2) }' /proc/meminfo)
  sed -e "s/@CPUS@/$cpus/" -e "s/@REAL_MEMORY@/$mem_mib/" "$HERE/slurm.conf.in"
}

# Writes slurm.conf; returns 0 if it changed (the daemons must then restart).
write_conf() {
  local new
  new=$(render_conf)
  if [[ -f $CONF && "$(<"$CONF")" == "$new" ]]; then
    return 1
  fi
  log "writing $CONF"
  install -d -m 0755 /etc/slurm
  printf '%s\n' "$new" >"$CONF.tmp"
  mv -f "$CONF.tmp" "$CONF"
}

wait_until() {
  local seconds=$1 deadline
  shift
  deadline=$((SECONDS + seconds))
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}

controller_up() { scontrol ping 2>/dev/null | grep -q 'is UP'; }

start_slurm() {
  install -d -m 0755 /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
  if ! daemon_pid "$SLURMCTLD_PID" slurmctld >/dev/null; then
    log "starting slurmctld"
    slurmctld 9>&- || die "slurmctld did not start (see /var/log/slurm/slurmctld.log)"
  fi
  wait_until 30 controller_up || die "slurmctld is not answering (see /var/log/slurm/slurmctld.log)"
  if ! daemon_pid "$SLURMD_PID" slurmd >/dev/null; then
    log "starting slurmd"
    # -N: the node is `localhost` whatever this machine's hostname is.
    slurmd -N "$NODE" 9>&- || die "slurmd did not start (see /var/log/slurm/slurmd.log)"
  fi
}

node_state() { sinfo -h -N -n "$NODE" -o %T 2>/dev/null | head -n 1; }

# slurmctld restores the node's last state from disk: ask slurmd itself that it is up.
slurmd_up() { scontrol show slurmd >/dev/null 2>&1; }

# Until the node can take jobs; a node that registered as down or drained is resumed.
wait_for_node() {
  local deadline=$((SECONDS + WAIT_S)) state=""
  while ((SECONDS < deadline)); do
    state=$(node_state)
    case $state in
      idle | mixed | allocated | completing) slurmd_up && return 0 ;;
      down | drained | draining | fail | failing)
        scontrol update nodename="$NODE" state=resume 2>/dev/null || true
        ;;
    esac
    sleep 0.5
  done
  die "node $NODE is '${state:-unknown}' after ${WAIT_S} s (see /var/log/slurm/slurmd.log)"
}

main() {
  require_root
  install -d -m 0755 /run/lock
  lock
  install_packages
  ensure_munge_key
  start_munged
  if write_conf; then
    stop_daemon "$SLURMD_PID" slurmd
    stop_daemon "$SLURMCTLD_PID" slurmctld
  fi
  start_slurm
  wait_for_node
}

main "$@"
