#!/usr/bin/env bash
# Installs the Debian packages of the peers study (scripts/peers.sh): ScaLAPACK over OpenMPI and
# Dask distributed. Kept out of scripts/setup.sh so that the demo never pulls in MPI.
# Idempotent: packages already present are not reinstalled and `apt-get update` runs at most once
# per invocation, only when something is missing.
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

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup-peers: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup-peers: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup-peers: done"
