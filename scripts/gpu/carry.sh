#!/usr/bin/env bash
# Fills .gpu-carry/ (git-ignored) with what scripts/gpu/check needs on a GPU machine without a
# network (docs/GPU.md), run where the package indexes can be reached:
#  - wheels/  CPython 3.12 x86-64 Linux wheels of scripts/gpu/carry.txt's packages, at the
#             versions requirements/dev.lock pins;
#  - debs/    Debian's bubblewrap and the libraries it links (libcap2, libselinux1, libpcre2-8);
#  - reference-kernels/problems/  with REFERENCE_KERNELS=PATH (a checkout of
#             gpu-mode/reference-kernels, or its bare git folder): its problem sets, and COMMIT.
#
#   make gpu-carry [REFERENCE_KERNELS=PATH]
set -euo pipefail
cd "$(dirname "$0")/../.."
carry=${GPU_CHECK_CARRY:-.gpu-carry}
python=${PYTHON:-.venv/bin/python}
version=${GPU_CHECK_PYTHON_VERSION:-3.12}
rm -rf "$carry/wheels" "$carry/debs" "$carry/reference-kernels"
mkdir -p "$carry/wheels" "$carry/debs"

# glibc 2.28 at most: any recent distribution's image runs them.
platforms=(--platform manylinux2014_x86_64)
for n in $(seq 17 28); do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
grep -vE '^[[:space:]]*(#|$)' scripts/gpu/carry.txt | while read -r name _; do
  pin=$(sed -nE "s/^${name}(\[[^]]*\])?==([^ ]+).*/\2/p" requirements/dev.lock | head -1)
  [ -n "$pin" ] || { echo "$name is not pinned in requirements/dev.lock" >&2; exit 1; }
  "$python" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version "$version" --implementation cp "${platforms[@]}" \
    -d "$carry/wheels" "$name==$pin"
done

if command -v apt-get >/dev/null; then
  (cd "$carry/debs" && apt-get download -q bubblewrap libcap2 libselinux1 libpcre2-8-0 >/dev/null)
else
  echo "no apt-get here: no bubblewrap carried (the GPU machine must have its own)" >&2
fi

if [ -n "${REFERENCE_KERNELS:-}" ]; then
  into=$carry/reference-kernels
  mkdir -p "$into"
  if [ -d "$REFERENCE_KERNELS/problems" ]; then
    cp -r "$REFERENCE_KERNELS/problems" "$into/"
    git -C "$REFERENCE_KERNELS" rev-parse HEAD >"$into/COMMIT" 2>/dev/null || echo unknown >"$into/COMMIT"
  elif git --git-dir="$REFERENCE_KERNELS" rev-parse --verify -q HEAD >/dev/null; then
    git --git-dir="$REFERENCE_KERNELS" archive HEAD problems | tar -x -C "$into"
    git --git-dir="$REFERENCE_KERNELS" rev-parse HEAD >"$into/COMMIT"
  else
    echo "REFERENCE_KERNELS=$REFERENCE_KERNELS has no problems/ folder and is no git folder" >&2
    exit 1
  fi
else
  echo "no problem sets carried: the check's problem-sets row will be skipped" \
    "(make gpu-carry REFERENCE_KERNELS=PATH)" >&2
fi
du -sh "$carry"/*
du -sh "$carry"
