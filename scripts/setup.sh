#!/usr/bin/env bash
# Installs the Debian packages Tessera needs. Idempotent: packages already present are not
# reinstalled and `apt-get update` runs at most once per invocation, only when something is missing.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  ninja-build          # builds compile more files at once than make (scripts/cmake-generator.sh)
  libasio-dev          # standalone Asio: TCP sessions of coordinator and worker
  libopenblas-dev      # GEMM kernels on the workers and for exact verification
  libmetis-dev         # graph partitioning (partition/)
  libxxhash-dev        # XXH3: content hashes of the placement cache and of resident blocks, header-only
  libmetis-doc         # real graphs for graph tests and studies: examples/graphs/{4elt,copter2,mdual}.graph
  python3-networkx     # a real directed graph for tests: examples/algorithms/hartford_drug.edgelist
  libyaml-cpp-dev      # cluster descriptions with line numbers for error messages
  libssl-dev           # HMAC-SHA256 challenge-response authentication
  libcli11-dev         # command-line parsing of tessera and tessera-worker
  libfmt-dev           # formatting of tables and messages
  nlohmann-json3-dev   # JSON reports
  libgtest-dev googletest  # tests
  gnuplot-nox          # plots of experiments
  iproute2             # network namespaces and tc for the emulated cluster
  python3              # summaries in scripts/demo.sh and scripts/bench-model.sh
  python3-yaml         # scripts/paper-profile.py reads and writes profiles and cluster files
  python3-dev pybind11-dev python3-pybind11  # the Python module tessera._tessera (python/)
  python3-numpy python3-scipy python3-pytest  # its arrays, sparse inputs and pytest suite (tests/python)
  python3-venv python3-pip python3-setuptools python3-wheel  # `pip install --no-build-isolation .` in a venv
  clang libclang-rt-14-dev  # scripts/fuzz.sh: libFuzzer and ASan/UBSan runtimes (-fsanitize=fuzzer)
  dpkg-dev file        # scripts/package.sh: dpkg-shlibdeps computes the .deb dependencies; file checks architectures
)

# shellcheck source=scripts/apt-packages.sh
source "$(dirname "$0")/apt-packages.sh"
install_missing_packages setup "${packages[@]}"
