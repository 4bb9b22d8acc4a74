#!/usr/bin/env bash
# Configures and builds Tessera into build/ (programs in build/bin/). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/cmake-generator.sh
source scripts/cmake-generator.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo > build.configure.log 2>&1 || { cat build.configure.log; exit 1; }
cmake --build build -j "$(nproc)"
