#!/usr/bin/env bash
# Installs bubblewrap, which the runner needs for a full sandbox (Debian/Ubuntu, as root).
# Without root it only says what is missing: runs then report `sandbox: partial`.
set -euo pipefail
command -v bwrap >/dev/null && command -v setpriv >/dev/null && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "bubblewrap is not installed: runs here will be sandboxed only partially" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends bubblewrap util-linux >/dev/null 2>&1 \
  || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends bubblewrap util-linux >/dev/null; }
command -v bwrap >/dev/null
