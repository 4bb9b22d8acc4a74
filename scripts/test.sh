#!/usr/bin/env bash
# The whole test suite from a fresh machine: install packages, build, run every GoogleTest binary
# through ctest. Tests that need root or cgroups print why they skip.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
cd build
ctest --output-on-failure --timeout 600 "$@"
