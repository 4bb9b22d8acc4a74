#!/usr/bin/env bash
# The demo from a fresh machine: install, build, start the emulated mixed cluster, profile it,
# multiply with the even split, the speed-proportional split (Tinetti), the same shares as 2D
# rectangles, the model-based split and the dynamic (pull) policy, compare; then PageRank and
# connected components on a mesh and an R-MAT graph, on the best node alone and on the nodes the
# graph placement model chooses, verified and compared; then power iteration on a matrix kept on
# the nodes (`tessera iterate`), on the best node alone and on the whole cluster; stop the workers.
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
# Graphs: each run beside the best node alone. `--nodes auto` (the default) runs on the nodes the
# graph placement model forecasts fastest and names each node it leaves out and why.
graph_reports=()
for graph in mesh2d:500x500 rmat:15; do
  for algorithm in pagerank cc; do
    for nodes in best auto; do
      echo
      echo "== graph: $algorithm on $graph, nodes $nodes =="
      report="build/demo-graph-${algorithm}-${graph//[:x]/_}-$nodes.json"
      "$T" graph "$CONFIG" --algorithm "$algorithm" --generate "$graph" --nodes "$nodes" --verify --report "$report"
      graph_reports+=("$report")
    done
  done
done
echo
python3 - "${graph_reports[@]}" <<'PY'
import json, sys
reports = [json.load(open(p)) for p in sys.argv[1:]]
print(f"{'graph':<22} {'algorithm':<9} {'best node alone':>16} {'cluster (auto)':>15} {'nodes':<26} {'ratio':>6}  verified")
for best, auto in zip(reports[0::2], reports[1::2]):
    best_s, auto_s = best["totals"]["total_s"], auto["totals"]["total_s"]
    alone = "+".join(best["choice"]["taking_part"])
    chosen = "+".join(auto["choice"]["taking_part"])
    verified = all(r["verification"] and r["verification"]["passed"] for r in (best, auto))
    print(f"{best['graph'].get('input', best['graph']['description'])[:22]:<22} {auto['algorithm']['name']:<9} {best_s:>9.3f}s ({alone:<5}) {auto_s:>14.3f}s "
          f"{chosen:<26} {best_s / auto_s:>5.2f}x  {verified}")
PY
# Work repeated on a matrix kept on the nodes: placed once, then each step sends only a vector, so
# even the Pis behind 100 Mbit/s links pay. The same power iteration on the best node alone and on
# every node, each with its placement and time per step, and once more in a new session.
RESIDENT_N="${RESIDENT_N:-8192}"
# A symmetric matrix with a dominant eigenvalue 1.25x the next: power iteration settles in some
# sixty steps.
/usr/bin/python3 - "$RESIDENT_N" build/demo-resident.npy <<'PY'  # Debian's python3-numpy (scripts/setup.sh)
import sys
import numpy as np
n = int(sys.argv[1])
rng = np.random.default_rng(3)
a = rng.uniform(-1, 1, (n, n))
a = (a + a.T) / 2
edge = 2 * np.sqrt(n / 6)  # the semicircle's edge
u = rng.standard_normal(n)
u /= np.linalg.norm(u)
a += 1.05 * edge * np.eye(n) + 1.6 * edge * np.outer(u, u)
np.save(sys.argv[2], a)
PY
best=$(python3 - "${CONFIG%.yaml}.profile.yaml" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
nodes = re.findall(r"- name: (\S+)\n(?:    .*\n)*?    gflops: ([0-9.e+-]+)", text)
print(max(nodes, key=lambda node: float(node[1]))[0])
PY
)
for nodes in "$best" all; do
  echo
  echo "== power iteration on a resident ${RESIDENT_N}x${RESIDENT_N} matrix, nodes $nodes =="
  only=()
  [ "$nodes" = all ] || only=(--nodes "$nodes")
  "$T" iterate "$CONFIG" --method power --matrix build/demo-resident.npy --iterations 500 --tol 1e-12 "${only[@]}"
done
# A second session on the same matrix: the workers kept its pieces in their block stores and the
# placement cache the shares the last run measured, so almost nothing is sent and nothing measured.
echo
echo "== the same again in a new session: the nodes kept the matrix =="
"$T" iterate "$CONFIG" --method power --matrix build/demo-resident.npy --iterations 500 --tol 1e-12
