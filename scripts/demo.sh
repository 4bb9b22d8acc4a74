#!/usr/bin/env bash
# The demo from a fresh machine: install, build, start the emulated mixed cluster, profile it,
# multiply with the even split, the speed-proportional split (Tinetti), the same shares as 2D
# rectangles, the model-based split and the dynamic (pull) policy, compare; then PageRank and
# connected components on the same cluster, asynchronous and synchronous, verified; stop the workers.
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG="${1:-configs/local-mixed.yaml}"
N="${N:-2048}"
scripts/setup.sh
scripts/build.sh > /dev/null
# The shipped emulated configs hold a throwaway secret inline, which tessera warns about on every
# command while the file is readable by others (git checks files out 644): only we may read it.
chmod 600 "$CONFIG" 2> /dev/null || true  # a config we do not own keeps its mode (and the warning)
T=build/bin/tessera
trap '"$T" down "$CONFIG" > /dev/null || true' EXIT
"$T" up "$CONFIG"
"$T" profile "$CONFIG"
reports=()
for run in "even rows" "proportional rows" "proportional 2d" "model rows" "dynamic rows"; do
  set -- $run
  echo
  echo "== policy $1, layout $2 =="
  "$T" multiply "$CONFIG" --n "$N" --policy "$1" --layout "$2" --verify freivalds --report "build/demo-$1-$2.json"
  reports+=("build/demo-$1-$2.json")
done
echo
python3 - "${reports[@]}" <<'PY'
import json, sys
reports = [json.load(open(p)) for p in sys.argv[1:]]
even = reports[0]["makespan_s"]
def seconds(value):
    return f"{value:>9.3f}s" if value is not None else f"{'-':>10}"
def percent(value):
    return f"{value * 100:>6.1f}%" if value is not None else f"{'-':>7}"
print(f"{'policy':<18} {'makespan':>9} {'predicted':>10} {'error':>7} {'imbalance':>10} {'vs even':>8}  verified")
for r in reports:
    name = r["policy"] if r["layout"] == "rows" else f"{r['policy']}/{r['layout']}"
    print(f"{name:<18} {r['makespan_s']:>8.3f}s {seconds(r['predicted_makespan_s'])} {percent(r['prediction_error'])} "
          f"{r['imbalance']:>10.3f} {r['makespan_s'] / even:>8.3f}  {r['verified']}")
PY
for mode in async sync; do
  for algorithm in pagerank cc; do
    echo
    echo "== graph: $algorithm, $mode, rmat:14 placed by METIS with the profile's speeds =="
    "$T" graph "$CONFIG" --algorithm "$algorithm" --generate rmat:14 --mode "$mode" --verify
  done
done
