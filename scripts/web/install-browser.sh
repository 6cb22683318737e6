#!/usr/bin/env bash
# Installs Debian's chromium for the browser tests (Playwright drives it through
# executable_path; its own browser download is not used). As root only; otherwise it says
# what is missing and the browser tests are skipped (failed under CI).
set -euo pipefail
command -v chromium >/dev/null && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "chromium is not installed: the browser tests will be skipped" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 \
  || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends chromium >/dev/null; }
command -v chromium >/dev/null
