#!/usr/bin/env bash
# Installs a build tree into a temporary prefix (cmake --install BUILD --prefix TMP) and runs the
# installed programs: --help of both, a keygen with mode 0600, the unit and docs in place.
#   tests/deploy/install_test.sh BUILD_DIR
set -euo pipefail
build="${1:?usage: install_test.sh BUILD_DIR}"
prefix="$(mktemp -d "${TMPDIR:-/tmp}/tessera-install-XXXXXX")"
trap 'rm -rf "$prefix"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$build" --prefix "$prefix" > "$prefix.log" 2>&1 || { cat "$prefix.log"; rm -f "$prefix.log"; fail "cmake --install"; }
rm -f "$prefix.log"
for path in bin/tessera bin/tessera-worker lib/systemd/system/tessera-worker.service \
            share/doc/tessera/README.md share/doc/tessera/deploy.md share/doc/tessera/architecture.md \
            share/doc/tessera/examples/configs/pi-lab.yaml share/doc/tessera-worker/deploy.md; do
  [ -e "$prefix/$path" ] || fail "cmake --install did not install $path"
done
# Documentation pages are not development files, whatever their names (docs/testing.md says how to
# run the tests); everything else whose name says test, fault, fuzz or bench is.
leaked="$(find "$prefix" \( -name '*test*' -o -name '*faulty*' -o -name '*fuzz*' -o -name '*bench*' -o -name '*.a' \) \
  ! -path "$prefix/share/doc/*.md" -print)"
[ -z "$leaked" ] || fail "installed test or development files: $leaked"

"$prefix/bin/tessera" --help | grep -q keygen || fail "installed tessera --help does not list keygen"
"$prefix/bin/tessera-worker" --help | grep -q -- --secret-file || fail "installed tessera-worker --help"
"$prefix/bin/tessera" --version | grep -q '^tessera ' || fail "installed tessera --version"
grep -q '^ExecStart=/.*/tessera-worker --listen 0.0.0.0:7070' "$prefix/lib/systemd/system/tessera-worker.service" \
  || fail "installed unit has no absolute ExecStart"

"$prefix/bin/tessera" keygen "$prefix/secret" > /dev/null
[ "$(stat -c %a "$prefix/secret")" = 600 ] || fail "keygen's file has mode $(stat -c %a "$prefix/secret"), not 600"
[ "$(tr -d '\n' < "$prefix/secret" | wc -c)" = 64 ] || fail "keygen's secret is not 64 hex digits"
if "$prefix/bin/tessera" keygen "$prefix/secret" > /dev/null 2>&1; then fail "keygen overwrote a secret"; fi
echo "ok: installed into a temporary prefix; tessera, tessera-worker and keygen run"
