#!/usr/bin/env bash
# Two builds of the graph engine on one part, interleaved: each round runs OLD then NEW
# `tessera-graph-engine-bench --runs 1` (async then sync) per graph, so a slow spell of this shared
# machine hits both alike; prints per graph and build the median (min..max) async and sync wall
# time and async edge updates over sync's. OLD is typically an earlier commit built in a git
# worktree (`git worktree add /tmp/old COMMIT && cmake -S /tmp/old -B /tmp/old/build
# -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build /tmp/old/build --target
# tessera-graph-engine-bench`). Nothing is hard-coded. Usage:
#   scripts/bench-graph-engine-ab.sh OLD_BENCH NEW_BENCH ROUNDS ALGORITHM GRAPH...
set -euo pipefail
old="$1"; new="$2"; rounds="$3"; algorithm="$4"; shift 4
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for graph in "$@"; do
  for _ in $(seq 1 "$rounds"); do
    for build in old new; do
      bin="$old"; [ "$build" = new ] && bin="$new"
      echo "$build $(basename "$graph") $("$bin" --algorithm "$algorithm" --graph "$graph" --runs 1 | grep '^run 1')" >> "$out"
    done
  done
done
python3 - "$out" <<'PY'
import re, statistics as st, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r'(old|new) (\S+) run 1: async ([\d.]+) s, (\d+) edge updates.*\| sync ([\d.]+) s, \d+ steps, (\d+) edge updates', line)
    if m:
        build, graph, a, ae, s, se = m.groups()
        rows.setdefault((graph, build), []).append((float(a), int(ae), float(s), int(se)))
f = lambda xs: f"{st.median(xs):.3f} ({min(xs):.3f}..{max(xs):.3f})"
print("| graph | build | async s | sync s | async edge updates / sync |")
print("|---|---|---|---|---|")
for (graph, build), runs in rows.items():
    print(f"| {graph} | {build} | {f([r[0] for r in runs])} | {f([r[2] for r in runs])} | "
          f"{st.median(r[1] / r[3] for r in runs):.2f} |")
PY
