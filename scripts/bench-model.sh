#!/usr/bin/env bash
# Benchmark of the profiler and the performance model on an emulated cluster (needs root), the
# figures docs/performance.md records for the model ("The performance model", "The model on a
# shared host"):
#   - time of a full profile (--refresh) and of a quick one (--refresh --quick);
#   - RUNS multiplies of size N per policy, interleaved (every policy once per round, so the
#     shared machine's drift hits all alike), reporting per policy the median (min..max) of the
#     makespan (wall time until every node was released), the prediction error
#     (|predicted - measured| / measured), the share of the compute-only bound
#     T* = 2 n^3 / (sum of the nodes' GEMM rates) that the run reached, once with the rates
#     measured alone and once with those measured with every node running at once, and the
#     Freivalds check's time after the product was complete as a share of the makespan (what the
#     user waits for; the half that reads A and B runs during the transfers and is shown apart).
# Each measurement starts once the machine is quiet (wait_for_quiet_machine in bench-cluster.sh).
# All figures come from this run on this machine; nothing is hard-coded. Usage:
#   scripts/bench-model.sh [CONFIG] ; env: N (2048), RUNS (5), POLICIES ("even proportional model dynamic";
#   dynamic@256 is the dynamic policy with --tile-rows 256)
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG="${1:-configs/local-mixed.yaml}"
N="${N:-2048}"
RUNS="${RUNS:-5}"
POLICIES="${POLICIES:-even proportional model dynamic}"
OUT="build/bench-model"
source scripts/bench-cluster.sh
start_bench_cluster "$CONFIG" "$OUT"

seconds() { local start=$EPOCHREALTIME; "$@" > /dev/null 2>&1; python3 -c "print($EPOCHREALTIME - $start)"; }
wait_for_quiet_machine
quick_s=$(seconds "$T" profile "$CONFIG" --refresh --quick --out "$OUT/quick.profile.yaml")
wait_for_quiet_machine
full_s=$(seconds "$T" profile "$CONFIG" --refresh)

for run in $(seq 1 "$RUNS"); do
  for policy in $POLICIES; do
    # dynamic@256: the dynamic policy with 256-row tiles.
    flags=(--policy "${policy%@*}")
    [[ "$policy" == *@* ]] && flags+=(--tile-rows "${policy#*@}")
    wait_for_quiet_machine
    "$T" multiply "$CONFIG" --n "$N" "${flags[@]}" --verify freivalds --report "$OUT/$policy-$N-$run.json" \
        > /dev/null 2> >(grep -v "holds the secret inline" >&2)
  done
done

python3 - "$OUT" "$N" "$RUNS" "$quick_s" "$full_s" "$CONFIG" "${CONFIG%.yaml}.profile.yaml" $POLICIES <<'PY'
import json, re, statistics, sys
out, n, runs, quick_s, full_s, config, profile_path, *policies = sys.argv[1:]
n = int(n)
# The profile's per-node rates at the reference size, alone and with every node at once.
text = open(profile_path).read()
alone = [float(v) for v in re.findall(r"^    gflops: ([0-9.eE+-]+)$", text, re.M)]
together = [float(v) for v in re.findall(r"^    concurrent_gflops: ([0-9.eE+-]+)$", text, re.M)]
t_alone = 2 * n ** 3 / (sum(alone) * 1e9)
t_together = 2 * n ** 3 / (sum(together) * 1e9) if len(together) == len(alone) else float("nan")
def spread(values, fmt="{:.3f}"):
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}..{fmt.format(max(values))})"
print(f"config {config}, n = {n}, {runs} interleaved runs per policy")
print(f"profile: full {float(full_s):.1f} s, quick {float(quick_s):.1f} s; T* = {t_alone:.3f} s from the rates alone, "
      f"{t_together:.3f} s from the rates with every node running\n")
print("| policy | makespan s | predicted s | prediction error | T*/makespan (alone) | T*/makespan (together) "
      "| verification after the run / makespan | verification during the run s | verified |")
print("|---|---|---|---|---|---|---|---|---|")
for policy in policies:
    reports = [json.load(open(f"{out}/{policy}-{n}-{r}.json")) for r in range(1, int(runs) + 1)]
    made = [r["makespan_s"] for r in reports]
    pred = [r["predicted_makespan_s"] for r in reports if r["predicted_makespan_s"] is not None]
    err = [r["prediction_error"] for r in reports if r["prediction_error"] is not None]
    check = [r["verification"]["seconds"] / r["makespan_s"] for r in reports]
    during = [r["verification"].get("overlapped_seconds", 0.0) for r in reports]
    ok = all(r["verified"] for r in reports)
    print(f"| {policy} | {spread(made)} | {spread(pred) if pred else '-'} | {spread(err) if err else '-'} | "
          f"{spread([t_alone / m for m in made], '{:.2f}')} | {spread([t_together / m for m in made], '{:.2f}')} | "
          f"{spread([100 * c for c in check], '{:.1f}')}% | {spread(during)} | {'all' if ok else 'NOT ALL'} |")
PY
