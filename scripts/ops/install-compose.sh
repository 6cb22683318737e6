#!/usr/bin/env bash
# Installs Debian's docker-compose, which tests/test_deployment.py uses to check
# deploy/compose/compose.yaml (`docker-compose config` needs no Docker daemon). As root only;
# otherwise it says what is missing and that test is skipped (failed under CI).
set -euo pipefail
command -v docker-compose >/dev/null && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "docker-compose is not installed: the compose file's check will be skipped" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends docker-compose >/dev/null 2>&1 \
  || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends docker-compose >/dev/null; }
command -v docker-compose >/dev/null
