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

# Total and idle (idle + iowait) jiffies of all CPUs. Niced work counts as busy: a build at nice
# 19 beside a profile still read the desktop's all-at-once GEMM at 12 of 59 GFLOP/s.
cpu_jiffies() { awk 'NR == 1 {total = 0; for (i = 2; i <= NF; i++) total += $i; print total, $5 + $6}' /proc/stat; }
# Waits (at most QUIET_WAIT_S seconds, default 120) until the machine is quiet before a measured
# run: at most QUIET_BUSY percent (default 25) of all CPU time busy, niced work included, over
# half a second (the bench cluster itself is idle between runs). On a shared machine a build or
# another benchmark otherwise lands inside some runs and not others. Says so on stderr when it
# gives up waiting.
wait_for_quiet_machine() {
  local deadline=$((SECONDS + ${QUIET_WAIT_S:-120})) before after busy
  while :; do
    before=$(cpu_jiffies); sleep 0.5; after=$(cpu_jiffies)
    busy=$(echo "$before $after" | awk '{dt = $3 - $1; di = $4 - $2; print (dt > 0 ? int(100 * (dt - di) / dt) : 0)}')
    [ "$busy" -le "${QUIET_BUSY:-25}" ] && return 0
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "bench: the machine stayed busy (${busy}% of CPU) for ${QUIET_WAIT_S:-120} s; measuring anyway" >&2
      return 0
    fi
    sleep 1
  done
}
