#!/usr/bin/env bash
# Installs the Debian packages of the peers study (scripts/peers.sh): ScaLAPACK over OpenMPI and
# Dask distributed. Kept out of scripts/setup.sh so that the demo never pulls in MPI.
# Idempotent (scripts/apt-packages.sh): packages already present are not reinstalled and
# `apt-get update` runs only when something is missing.
set -euo pipefail

packages=(
  openmpi-bin               # mpirun, and the runtime the ScaLAPACK driver runs on
  libopenmpi-dev            # mpicc and the MPI headers that build peers/scalapack/pdgemm_driver.c
  libscalapack-openmpi-dev  # pdgemm and the BLACS process grid (links OpenBLAS through libblas.so.3)
  python3-distributed       # Dask's distributed Scheduler and `dask worker` (brings python3-dask)
  python3-numpy             # the Dask driver's inputs and Freivalds check
  gnuplot-nox               # peers.png
  iproute2                  # `ip netns exec` to place processes in a node's namespace
)

# shellcheck source=scripts/apt-packages.sh
source "$(dirname "$0")/apt-packages.sh"
install_missing_packages setup-peers "${packages[@]}"
