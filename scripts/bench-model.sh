#!/usr/bin/env bash
# Benchmark of the profiler and the performance model on an emulated cluster (needs root):
#   - time of a full profile (--refresh) and of a quick one (--refresh --quick);
#   - RUNS multiplies of size N per policy, reporting median makespan and median prediction error
#     (|predicted - measured| / measured makespan), with min and max.
# All figures come from this run on this machine; nothing is hard-coded. Usage:
#   scripts/bench-model.sh [CONFIG] ; env: N (2048), RUNS (5), POLICIES ("even proportional model")
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG="${1:-configs/local-mixed.yaml}"
N="${N:-2048}"
RUNS="${RUNS:-5}"
POLICIES="${POLICIES:-even proportional model}"
OUT="build/bench-model"
source scripts/bench-cluster.sh
start_bench_cluster "$CONFIG" "$OUT"

seconds() { local start=$EPOCHREALTIME; "$@" > /dev/null 2>&1; python3 -c "print($EPOCHREALTIME - $start)"; }
quick_s=$(seconds "$T" profile "$CONFIG" --refresh --quick --out "$OUT/quick.profile.yaml")
full_s=$(seconds "$T" profile "$CONFIG" --refresh)

for policy in $POLICIES; do
  for run in $(seq 1 "$RUNS"); do
    "$T" multiply "$CONFIG" --n "$N" --policy "$policy" --verify freivalds --report "$OUT/$policy-$N-$run.json" > /dev/null
  done
done

python3 - "$OUT" "$N" "$RUNS" "$quick_s" "$full_s" "$CONFIG" $POLICIES <<'PY'
import json, statistics, sys
out, n, runs, quick_s, full_s, config, *policies = sys.argv[1:]
print(f"config {config}, n = {n}, {runs} runs per policy")
print(f"profile: full {float(full_s):.1f} s, quick {float(quick_s):.1f} s\n")
print("| policy | makespan median (min..max) s | predicted median s | prediction error median (min..max) | verified |")
print("|---|---|---|---|---|")
for policy in policies:
    reports = [json.load(open(f"{out}/{policy}-{n}-{r}.json")) for r in range(1, int(runs) + 1)]
    made = [r["makespan_s"] for r in reports]
    pred = [r["predicted_makespan_s"] for r in reports]
    err = [r["prediction_error"] for r in reports]
    ok = all(r["verified"] for r in reports)
    print(f"| {policy} | {statistics.median(made):.3f} ({min(made):.3f}..{max(made):.3f}) | {statistics.median(pred):.3f} "
          f"| {statistics.median(err):.3f} ({min(err):.3f}..{max(err):.3f}) | {'all' if ok else 'NOT ALL'} |")
PY
