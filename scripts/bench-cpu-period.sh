#!/usr/bin/env bash
# What the CFS period of an emulated CPU quota does (why 20 ms is the default: docs/emulation.md): for each period, a
# quarter-core "pi" next to an uncapped "desk" on loopback (one cluster per period, `tessera up`
# creates the cgroup with `emulate: {cpu: 0.25, cpu_period: P}`), RUNS interleaved rounds of
#   short: a multiply whose GEMM takes about 20 ms at full speed (n = SMALL), and
#   long:  one that takes about a second (n = LARGE),
# each run on the desk alone and on the pi alone (--weights 1,0 / 0,1). Reports per period the
# median (min..max) of compute_s(pi) / compute_s(desk), the worker's own GEMM time: 4.0 is a
# faithful quarter core. A long period lets a short job run at full speed inside one slice (ratio
# far below 4 on short jobs: the pi looks fast); a short period throttles often, which costs the
# worker time (ratio above 4 on long jobs). Needs root (cgroups). Nothing is hard-coded.
#   scripts/bench-cpu-period.sh     env: PERIODS ("100ms 20ms 10ms 5ms"), RUNS (7), SMALL (800), LARGE (2048)
set -euo pipefail
cd "$(dirname "$0")/.."
PERIODS="${PERIODS:-100ms 20ms 10ms 5ms}"
RUNS="${RUNS:-7}"
SMALL="${SMALL:-800}"
LARGE="${LARGE:-2048}"
T=build/bin/tessera
[ -x "$T" ] || scripts/build.sh > /dev/null
OUT="build/bench-cpu-period"
rm -rf "$OUT" && mkdir -p "$OUT"
current=""
cleanup() { if [ -n "$current" ]; then "$T" down "$current" > /dev/null 2>&1 || true; fi; }
trap cleanup EXIT

for period in $PERIODS; do
  config="$OUT/period-$period.yaml"
  cat > "$config" <<YAML
cluster: cpu-period-$period
secret: bench-cpu-period
nodes:
  - {name: desk, host: 127.0.0.1, port: 7261, threads: 1}
  - name: pi
    host: 127.0.0.1
    port: 7262
    threads: 1
    emulate: {cpu: 0.25, cpu_period: $period}
YAML
  chmod 600 "$config"
  current="$config"
  "$T" up "$config" > "$OUT/up-$period.log"
  for run in $(seq 1 "$RUNS"); do
    for size in small long; do
      n="$SMALL"; [ "$size" = long ] && n="$LARGE"
      for node in desk pi; do
        weights="1,0"; [ "$node" = pi ] && weights="0,1"
        "$T" multiply "$config" --n "$n" --policy proportional --weights "$weights" --verify none \
            --report "$OUT/$period-$size-$node-$run.json" > /dev/null 2>&1
      done
    done
  done
  "$T" down "$config" > /dev/null
  current=""
done

python3 - "$OUT" "$RUNS" "$SMALL" "$LARGE" $PERIODS <<'PY'
import json, statistics, sys
out, runs, small, large, *periods = sys.argv[1:]
def compute(period, size, node, run):
    report = json.load(open(f"{out}/{period}-{size}-{node}-{run}.json"))
    return sum(n["compute_s"] for n in report["nodes"])
def spread(values):
    return f"{statistics.median(values):.2f} ({min(values):.2f}..{max(values):.2f})"
print(f"quarter-core pi / uncapped desk, worker GEMM time (compute_s), {runs} interleaved runs; 4.00 is faithful\n")
print(f"| period | short job (n={small}) | desk short ms | long job (n={large}) | desk long s |")
print("|---|---|---|---|---|")
for period in periods:
    row = []
    for size in ("small", "long"):
        ratios = [compute(period, size, "pi", r) / compute(period, size, "desk", r) for r in range(1, int(runs) + 1)]
        desk = [compute(period, size, "desk", r) for r in range(1, int(runs) + 1)]
        row.append(spread(ratios))
        row.append(f"{statistics.median(desk) * (1000 if size == 'small' else 1):.{0 if size == 'small' else 2}f}")
    print(f"| {period} | {row[0]} | {row[1]} | {row[2]} | {row[3]} |")
PY
