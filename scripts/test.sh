#!/usr/bin/env bash
# The whole test suite from a fresh machine: install packages, build, run every libFuzzer harness
# for a short bounded time (TESSERA_FUZZ_SECONDS each, default 30; 0 skips it) so that a codec or
# handshake regression fails CI, then every GoogleTest binary through ctest (last, so its summary
# closes the output). Tests that need root or cgroups print why they skip.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
fuzz_seconds="${TESSERA_FUZZ_SECONDS:-30}"
if [ "$fuzz_seconds" -gt 0 ]; then
  scripts/fuzz.sh "$fuzz_seconds"
fi
cd build
ctest --output-on-failure --timeout 600 "$@"
