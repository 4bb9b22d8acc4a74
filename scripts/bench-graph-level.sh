#!/usr/bin/env bash
# Async graph engine benchmark: the coordinator's common priority level (--level-fraction) on and
# off against sync, and the whole cluster against its fastest node alone. PageRank to 1e-6, METIS
# placement by the profile; "alone" gives the first node every vertex (--weights 1,0,...). RUNS
# rounds, each running every setting once (interleaved, so a slow spell of this shared machine hits
# all of them alike); prints per graph and setting the median wall time (min..max), METIS placement
# time, edge updates and their ratio to sync. Every run is verified. Nothing is hard-coded. Usage:
#   scripts/bench-graph-level.sh [CONFIG]   env: RUNS (5), GRAPHS ("rmat:16 mesh2d:1000x1000 ..."),
#                                            SETTINGS ("async-f0 async-f0.5 sync alone-sync alone-async")
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG="${1:-configs/local-mixed-lan.yaml}"
RUNS="${RUNS:-5}"
GRAPHS="${GRAPHS:-/usr/share/doc/libmetis-dev/examples/graphs/copter2.graph rmat:16 lognormal:100000 mesh2d:1000x1000}"
SETTINGS="${SETTINGS:-async-f0 async-f0.5 sync alone-sync alone-async}"
OUT="build/bench-graph-level"
source scripts/bench-cluster.sh
start_bench_cluster "$CONFIG" "$OUT"
"$T" profile "$CONFIG" > /dev/null
nodes=$("$T" status "$CONFIG" 2>/dev/null | grep -c reachable)
alone="1$(printf ',0%.0s' $(seq 2 "$nodes"))"

for run in $(seq 1 "$RUNS"); do
  for graph in $GRAPHS; do
    if [ -f "$graph" ]; then input=(--graph "$graph"); else input=(--generate "$graph"); fi
    key=$(basename "$graph" | tr ':' '-')
    for setting in $SETTINGS; do
      case "$setting" in
        async-f*) flags=(--mode async --level-fraction "${setting#async-f}") ;;
        sync) flags=(--mode sync) ;;
        alone-sync) flags=(--mode sync --weights "$alone") ;;
        alone-async) flags=(--mode async --weights "$alone") ;;
        *) echo "unknown setting $setting" >&2; exit 2 ;;
      esac
      "$T" graph "$CONFIG" --algorithm pagerank "${input[@]}" "${flags[@]}" --verify 2> >(grep -v "holds the secret inline" >&2) \
          --report "$OUT/$key-$setting-$run.json" > /dev/null
    done
  done
done

python3 - "$OUT" "$RUNS" "$CONFIG" "$GRAPHS" "$SETTINGS" <<'PY'
import json, statistics, sys, os
out, runs, config, graphs, settings = sys.argv[1:]
runs = int(runs)
print(f"config {config}, pagerank to 1e-6, metis by profile, {runs} interleaved runs per setting\n")
print("| graph | setting | wall median (min..max) s | placement s | edge updates median | / sync | verified |")
print("|---|---|---|---|---|---|---|")
fmt = lambda xs: f"{statistics.median(xs):.3f} ({min(xs):.3f}..{max(xs):.3f})"
for graph in graphs.split():
    key = os.path.basename(graph).replace(':', '-')
    load = lambda s: [json.load(open(f"{out}/{key}-{s}-{r}.json")) for r in range(1, runs + 1)]
    sync_updates = statistics.median(r["totals"]["edge_updates"] for r in load("sync")) if "sync" in settings.split() else None
    for setting in settings.split():
        reports = load(setting)
        wall = [r["totals"]["wall_s"] for r in reports]
        place = [r["totals"]["placement_s"] for r in reports]
        updates = statistics.median(r["totals"]["edge_updates"] for r in reports)
        ratio = f"{updates / sync_updates:.2f}" if sync_updates else "-"
        ok = all(r["verification"] and r["verification"].get("passed") for r in reports)
        print(f"| {key} | {setting} | {fmt(wall)} | {statistics.median(place):.3f} | {updates:.3e} | {ratio} | {ok} |")
PY
