#!/usr/bin/env bash
# Credit flow control benchmark: queue depth (jobs a node may hold unanswered) and refill
# threshold (credits that must be back before the coordinator sends again), starting from the
# Pi thesis' 40/4. RUNS multiplies of size N per setting, all in one session of this script so the
# settings share the machine's conditions; prints median makespan (min..max), median GFLOP/s and
# the workers' median communication share of their CPU. Nothing is hard-coded. Usage:
#   scripts/bench-credits.sh [CONFIG]   env: N (2048), RUNS (5), PANEL (64), POLICY (proportional),
#                                        SETTINGS ("1/1 2/1 4/1 8/4 16/4 40/4 40/1")
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG="${1:-configs/local.yaml}"
N="${N:-2048}"
RUNS="${RUNS:-5}"
PANEL="${PANEL:-64}"
POLICY="${POLICY:-proportional}"
SETTINGS="${SETTINGS:-1/1 2/1 4/1 8/4 16/4 40/4 40/1}"
OUT="build/bench-credits"
source scripts/bench-cluster.sh
start_bench_cluster "$CONFIG" "$OUT"
"$T" profile "$CONFIG" > /dev/null

# Rounds interleave the settings, so a slow spell of the shared machine hits all of them alike.
for run in $(seq 1 "$RUNS"); do
  for setting in $SETTINGS; do
    depth="${setting%/*}" refill="${setting#*/}"
    "$T" multiply "$CONFIG" --n "$N" --policy "$POLICY" --panel-width "$PANEL" --panels-in-flight "$depth" \
        --refill "$refill" --verify freivalds --report "$OUT/$depth-$refill-$run.json" > /dev/null
  done
done

python3 - "$OUT" "$N" "$RUNS" "$PANEL" "$CONFIG" "$POLICY" $SETTINGS <<'PY'
import json, statistics, sys
out, n, runs, panel, config, policy, *settings = sys.argv[1:]
print(f"config {config}, policy {policy}, n = {n}, panels of {panel} rows, {runs} runs per setting (interleaved)\n")
print("| queue depth / refill | makespan median (min..max) s | GFLOP/s median | worker comm CPU median | verified |")
print("|---|---|---|---|---|")
for setting in settings:
    depth, refill = setting.split("/")
    reports = [json.load(open(f"{out}/{depth}-{refill}-{r}.json")) for r in range(1, int(runs) + 1)]
    made = [r["makespan_s"] for r in reports]
    shares = []
    for r in reports:
        io = sum(node["worker_io_cpu_s"] for node in r["nodes"])
        cpu = sum(node["worker_compute_cpu_s"] for node in r["nodes"])
        shares.append(io / (io + cpu) if io + cpu > 0 else float("nan"))
    print(f"| {depth} / {refill} | {statistics.median(made):.3f} ({min(made):.3f}..{max(made):.3f}) | "
          f"{statistics.median(r['gflops'] for r in reports):.1f} | {100 * statistics.median(shares):.1f}% | "
          f"{all(r['verified'] for r in reports)} |")
PY
