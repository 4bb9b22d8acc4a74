#!/usr/bin/env bash
# Cross-builds the worker-only tessera-worker package for arm64 (Raspberry Pi 4/5, 64-bit OS) on
# this x86 Debian machine with Debian's multiarch toolchain, from scratch and idempotently:
#   1. adds the arm64 architecture to dpkg and installs crossbuild-essential-arm64, qemu-user-static
#      and the arm64 -dev packages the worker links (OpenBLAS, OpenSSL, fmt; Asio and CLI11 are
#      header-only), each only when missing;
#   2. configures build-arm64/ with cmake/toolchains/aarch64-linux-gnu.cmake and
#      -DTESSERA_WORKER_ONLY=ON, builds tessera-worker (build-arm64/bin/tessera-worker, which the
#      mixed-architecture test runs under qemu-aarch64-static);
#   3. packs build-pkg/tessera-worker_<version>_arm64.deb (dependencies from dpkg-shlibdeps against
#      the arm64 libraries) and checks its contents with scripts/check-packages.sh.
# Options: --no-install (fail instead of installing packages), --build-only (skip the .deb).
# Environment: JOBS (default: nproc), NICE (default 19: the build yields to other work).
# Exit 3 when the toolchain cannot be installed (no root/sudo, no network, no arm64 archive), so
# that scripts/test.sh can go on without it; any other failure is 1.
set -euo pipefail
cd "$(dirname "$0")/.."

install_packages=1
make_package=1
for arg in "$@"; do
  case "$arg" in
    --no-install) install_packages=0 ;;
    --build-only) make_package=0 ;;
    *) echo "cross-arm64: unknown option $arg (use --no-install, --build-only)" >&2; exit 2 ;;
  esac
done

jobs="${JOBS:-$(nproc)}"
nice_level="${NICE:-19}"
build_dir=build-arm64
package_dir=build-pkg

# Host (amd64) tools and the arm64 libraries the worker links.
host_packages=(crossbuild-essential-arm64 qemu-user-static dpkg-dev pkg-config cmake libasio-dev libcli11-dev libxxhash-dev)
arm64_packages=(libopenblas-dev:arm64 libssl-dev:arm64 libfmt-dev:arm64)

missing=()
for pkg in "${host_packages[@]}" "${arm64_packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
has_arm64=0
if dpkg --print-foreign-architectures | grep -qx arm64; then has_arm64=1; fi

if [ ${#missing[@]} -gt 0 ] || [ "$has_arm64" -eq 0 ]; then
  if [ "$has_arm64" -eq 0 ]; then missing+=("(dpkg architecture arm64)"); fi
  if [ "$install_packages" -eq 0 ]; then
    echo "cross-arm64: missing ${missing[*]}; run without --no-install (needs root or sudo)" >&2
    exit 3
  fi
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    sudo -n true 2>/dev/null || { echo "cross-arm64: missing ${missing[*]} and no root or sudo to install them" >&2; exit 3; }
    SUDO="sudo -n"
  fi
  export DEBIAN_FRONTEND=noninteractive
  installed=1
  if [ "$has_arm64" -eq 0 ]; then
    echo "cross-arm64: dpkg --add-architecture arm64"
    $SUDO dpkg --add-architecture arm64 || installed=0
  fi
  echo "cross-arm64: installing ${missing[*]}"
  # The arm64 -dev packages must match the installed amd64 versions of the same libraries (multiarch
  # "same"), so apt may upgrade those too, to the archive's current version.
  if [ "$installed" -eq 1 ]; then
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends \
      $(printf '%s\n' "${missing[@]}" | grep -v '^(') || installed=0
  fi
  if [ "$installed" -eq 0 ]; then
    echo "cross-arm64: could not install the cross toolchain (see above)" >&2
    exit 3
  fi
fi

start=$(date +%s)
# Configured every time (cheap, and a changed CMakeLists is picked up); compiled only what changed.
# shellcheck source=scripts/cmake-generator.sh
source scripts/cmake-generator.sh
nice -n "$nice_level" cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
  -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake -DTESSERA_WORKER_ONLY=ON \
  > "$build_dir.configure.log" 2>&1 || { cat "$build_dir.configure.log"; exit 1; }
nice -n "$nice_level" cmake --build "$build_dir" -j "$jobs" --target tessera-worker
file "$build_dir/bin/tessera-worker" | grep -q "ARM aarch64" || {
  echo "cross-arm64: $build_dir/bin/tessera-worker is not an arm64 program: $(file -b "$build_dir/bin/tessera-worker")" >&2
  exit 1
}
echo "cross-arm64: $build_dir/bin/tessera-worker built in $(( $(date +%s) - start )) s"

if [ "$make_package" -eq 1 ]; then
  mkdir -p "$package_dir"
  # dpkg-shlibdeps resolves the arm64 libraries' packages when it is told the host architecture.
  (cd "$build_dir" && DEB_HOST_ARCH=arm64 nice -n "$nice_level" cpack -G DEB -B "$PWD/../$package_dir" \
     > ../"$build_dir".cpack.log 2>&1) || { cat "$build_dir.cpack.log"; exit 1; }
  rm -rf "$package_dir/_CPack_Packages"
  scripts/check-packages.sh "$package_dir"/tessera-worker_*_arm64.deb
fi
