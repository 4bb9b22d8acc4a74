#!/usr/bin/env bash
# Checks Tessera's .deb files: names, architectures, maintainer scripts, the files each must hold
# and must not hold (tests, fault twins, benchmarks, the other package's program), dependencies
# limited to the libraries the program links (no METIS, yaml-cpp, GoogleTest, gnuplot in the
# worker's), and that each program is built for the package's architecture.
#   scripts/check-packages.sh PACKAGE.deb...           check these
#   scripts/check-packages.sh --if-built DIR           check DIR/*.deb; exit 77 (ctest: skipped)
#                                                      with the reason when there are none
# Exit 0 when every check passes, 1 with each failure listed.
set -euo pipefail

if [ "${1:-}" = "--if-built" ]; then
  dir="${2:?--if-built needs a folder}"
  shopt -s nullglob
  packages=("$dir"/tessera*.deb)
  if [ ${#packages[@]} -eq 0 ]; then
    echo "SKIPPED: no packages in $dir; build them with scripts/package.sh (and scripts/cross-arm64.sh for arm64)"
    exit 77
  fi
  set -- "${packages[@]}"
fi
[ $# -gt 0 ] || { echo "usage: $0 PACKAGE.deb... | --if-built DIR" >&2; exit 2; }

failures=0
fail() { echo "FAIL $package: $*"; failures=$((failures + 1)); }

# Libraries a Tessera package may depend on (Depends entries, versions stripped): the C and C++
# runtimes, OpenSSL, fmt, OpenBLAS (or the reference BLAS/LAPACK it may resolve to), and for the
# coordinator yaml-cpp and METIS. Anything else is a dependency that leaked in.
worker_allowed='^(libc6|libgcc-s1|libstdc\+\+6|libssl3|libfmt[0-9]+|libopenblas0(-pthread|-openmp|-serial)?|libopenblas0|libblas3|libblas\.so\.3|libgomp1)$'
coordinator_allowed='^(libc6|libgcc-s1|libstdc\+\+6|libssl3|libfmt[0-9]+|libopenblas0(-pthread|-openmp|-serial)?|libblas3|libblas\.so\.3|libgomp1|libyaml-cpp[0-9.]+|libmetis5)$'

for package in "$@"; do
  [ -f "$package" ] || { echo "FAIL $package: no such file"; failures=$((failures + 1)); continue; }
  name="$(dpkg-deb -f "$package" Package)"
  arch="$(dpkg-deb -f "$package" Architecture)"
  depends="$(dpkg-deb -f "$package" Depends)"
  contents="$(dpkg-deb --contents "$package" | awk '{print $6}')"
  [ -n "$depends" ] || fail "no Depends: dpkg-shlibdeps did not run"
  case "$(basename "$package")" in
    "${name}"_*_"${arch}".deb) ;;
    *) fail "file name does not match Package $name / Architecture $arch" ;;
  esac
  case "$name" in
    tessera-worker)
      program=usr/bin/tessera-worker
      allowed="$worker_allowed"
      required=(./usr/bin/tessera-worker ./usr/lib/systemd/system/tessera-worker.service
                ./usr/share/doc/tessera-worker/deploy.md)
      forbidden='usr/bin/tessera$'
      control="$(mktemp -d)"
      dpkg-deb --control "$package" "$control"
      for script in postinst prerm postrm; do
        [ -x "$control/$script" ] || fail "no executable $script"
      done
      grep -q 'install -d -o root -g root -m 0700 /etc/tessera' "$control/postinst" \
        || fail "postinst does not create /etc/tessera (root, 0700)"
      rm -rf "$control"
      unit="$(dpkg-deb --fsys-tarfile "$package" | tar -xO ./usr/lib/systemd/system/tessera-worker.service)"
      grep -q '^ExecStart=/usr/bin/tessera-worker ' <<<"$unit" || fail "unit's ExecStart is not /usr/bin/tessera-worker"
      grep -q '^LoadCredential=secret:/etc/tessera/secret' <<<"$unit" || fail "unit does not load /etc/tessera/secret"
      ;;
    tessera)
      program=usr/bin/tessera
      allowed="$coordinator_allowed"
      required=(./usr/bin/tessera ./usr/share/doc/tessera/deploy.md ./usr/share/doc/tessera/architecture.md
                ./usr/share/doc/tessera/examples/configs/pi-lab.yaml)
      forbidden='usr/bin/tessera-worker$'
      grep -q 'gnuplot' <<<"$(dpkg-deb -f "$package" Recommends)" || fail "gnuplot-nox not in Recommends"
      ;;
    *) fail "unknown package name '$name'"; continue ;;
  esac
  for path in "${required[@]}"; do
    grep -qxF "$path" <<<"$contents" || fail "missing $path"
  done
  if grep -E "$forbidden" <<<"$contents" >/dev/null; then fail "holds the other package's program"; fi
  # Programs and libraries only: the documents (docs/testing.md among them) are meant to ship.
  leaked="$(grep -v '^\./usr/share/doc/' <<<"$contents" | grep -Ei '(test|faulty|fuzz|bench|gtest|\.a$|/include/)' || true)"
  [ -z "$leaked" ] || fail "holds test, benchmark or development files: $(tr '\n' ' ' <<<"$leaked")"
  IFS=',' read -r -a entries <<<"$depends"
  for entry in "${entries[@]}"; do
    # "libssl3 (>= 3.0.0)" or "libopenblas0 | libblas3": every alternative must be allowed.
    for alternative in $(sed -E 's/\([^)]*\)//g; s/\|/ /g' <<<"$entry"); do
      grep -Eq "$allowed" <<<"$alternative" || fail "unexpected dependency '$alternative' (Depends: $depends)"
    done
  done
  file_arch="$(dpkg-deb --fsys-tarfile "$package" | tar -xO "./$program" | file -b -)"
  case "$arch" in
    amd64) expected='x86-64' ;;
    arm64) expected='ARM aarch64' ;;
    *) expected="" ;;
  esac
  if [ -n "$expected" ] && ! grep -q "$expected" <<<"$file_arch"; then
    fail "$program is not built for $arch: $file_arch"
  fi
  echo "ok   $(basename "$package"): $(wc -l <<<"$contents") entries; Depends: $depends"
done

if [ "$failures" -gt 0 ]; then
  echo "check-packages: $failures failure(s)"
  exit 1
fi
