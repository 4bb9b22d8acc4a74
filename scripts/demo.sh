#!/usr/bin/env bash
# The demo from a fresh machine: install, build, start the local cluster, profile it, multiply
# with the even split and with the balanced (proportional) split, compare, and stop the workers.
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG="${1:-configs/local-mixed.yaml}"
N="${N:-2048}"
scripts/setup.sh
scripts/build.sh > /dev/null
T=build/bin/tessera
trap '"$T" down "$CONFIG" > /dev/null || true' EXIT
"$T" up "$CONFIG"
"$T" profile "$CONFIG"
echo
echo "== even split =="
"$T" multiply "$CONFIG" --n "$N" --policy even --verify freivalds --report build/demo-even.json
echo
echo "== balanced split (proportional to measured speed) =="
"$T" multiply "$CONFIG" --n "$N" --policy proportional --verify freivalds --report build/demo-proportional.json
echo
python3 - build/demo-even.json build/demo-proportional.json <<'PY'
import json, sys
even, bal = (json.load(open(p)) for p in sys.argv[1:3])
print(f"even split:      makespan {even['makespan_s']:.3f} s, imbalance {even['imbalance']:.3f}, verified {even['verified']}")
print(f"balanced split:  makespan {bal['makespan_s']:.3f} s, imbalance {bal['imbalance']:.3f}, verified {bal['verified']}")
print(f"balanced / even makespan: {bal['makespan_s'] / even['makespan_s']:.3f}")
PY
