#!/usr/bin/env bash
# The whole test suite from a fresh machine: install packages, build, cross-build the arm64 worker
# and its package (scripts/cross-arm64.sh; TESSERA_CROSS_ARM64=0 skips it, and so does a machine
# that cannot install the cross toolchain, saying so; the mixed-architecture test then skips too),
# run every libFuzzer harness for a short bounded time (TESSERA_FUZZ_SECONDS each, default 30; 0
# skips it) so that a codec or handshake regression fails CI, then every GoogleTest binary through
# ctest (last, so its summary closes the output), two at a time: every test must pass on a loaded
# two-core machine anyway, and the suite takes half as long. Tests that need root or cgroups print
# why they skip.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
if [ "${TESSERA_CROSS_ARM64:-1}" != 0 ]; then
  cross_status=0
  scripts/cross-arm64.sh || cross_status=$?
  if [ "$cross_status" -eq 3 ]; then
    echo "test: no arm64 cross toolchain on this machine; the mixed-architecture test will skip"
  elif [ "$cross_status" -ne 0 ]; then
    exit "$cross_status"
  fi
fi
fuzz_seconds="${TESSERA_FUZZ_SECONDS:-30}"
if [ "$fuzz_seconds" -gt 0 ]; then
  scripts/fuzz.sh "$fuzz_seconds"
fi
cd build
# Graph runs keep placements and run figures in the user's cache by default; the tests' go to a
# folder of their own, removed afterwards.
XDG_CACHE_HOME="$(mktemp -d)"
export XDG_CACHE_HOME
trap 'rm -rf "$XDG_CACHE_HOME"' EXIT
ctest --output-on-failure --parallel 2 --timeout 600 "$@"
