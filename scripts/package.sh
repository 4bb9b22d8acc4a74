#!/usr/bin/env bash
# Builds the two Debian packages for this machine's architecture from scratch into build-pkg/:
#   tessera-worker_<version>_<arch>.deb   the daemon, its systemd unit, postinst making /etc/tessera
#   tessera_<version>_<arch>.deb          the coordinator program, example configs, docs
# A fresh build-deb/ (Release, CMAKE_INSTALL_PREFIX=/usr, no tests or benchmarks), cpack with
# dependencies from dpkg-shlibdeps, then scripts/check-packages.sh on both. The arm64 worker
# package comes from scripts/cross-arm64.sh into the same folder; this script leaves it alone.
# Environment: JOBS (default: nproc), NICE (default 19).
set -euo pipefail
cd "$(dirname "$0")/.."

jobs="${JOBS:-$(nproc)}"
nice_level="${NICE:-19}"
build_dir=build-deb
package_dir=build-pkg
arch="$(dpkg --print-architecture)"

start=$(date +%s)
rm -rf "$build_dir" "$package_dir/_CPack_Packages"
rm -f "$package_dir"/tessera_*_"$arch".deb "$package_dir"/tessera-worker_*_"$arch".deb
mkdir -p "$package_dir"
# shellcheck source=scripts/cmake-generator.sh
source scripts/cmake-generator.sh
nice -n "$nice_level" cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
  -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCHMARKS=OFF > "$build_dir.configure.log" 2>&1 \
  || { cat "$build_dir.configure.log"; exit 1; }
nice -n "$nice_level" cmake --build "$build_dir" -j "$jobs" --target tessera tessera-worker
(cd "$build_dir" && nice -n "$nice_level" cpack -G DEB -B "$PWD/../$package_dir" > ../"$build_dir".cpack.log 2>&1) \
  || { cat "$build_dir.cpack.log"; exit 1; }
rm -rf "$package_dir/_CPack_Packages"
scripts/check-packages.sh "$package_dir"/tessera-worker_*_"$arch".deb "$package_dir"/tessera_*_"$arch".deb
echo "package: built in $(( $(date +%s) - start )) s:"
ls -l "$package_dir"/*.deb
