# Sourced by the bench scripts (bench-credits, bench-graph-level, bench-model): sets T to the
# tessera CLI (building it if missing), makes the output folder, brings CONFIG's cluster up and
# stops it again when the script exits, however it exits. Usage: start_bench_cluster CONFIG OUT
T=build/bin/tessera
start_bench_cluster() {
  local config="$1" out="$2"
  [ -x "$T" ] || scripts/build.sh > /dev/null
  mkdir -p "$out"
  # shellcheck disable=SC2064  # the config is fixed now, on purpose
  trap "\"$T\" down \"$config\" > /dev/null || true" EXIT
  "$T" up "$config" > /dev/null
}
