#!/usr/bin/env bash
# The demo from a fresh machine: install, build, start the emulated mixed cluster, profile it,
# multiply with the even split, the speed-proportional split (Tinetti) and the model-based split,
# compare, and stop the workers.
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
for policy in even proportional model; do
  echo
  echo "== policy $policy =="
  "$T" multiply "$CONFIG" --n "$N" --policy "$policy" --verify freivalds --report "build/demo-$policy.json"
done
echo
python3 - build/demo-even.json build/demo-proportional.json build/demo-model.json <<'PY'
import json, sys
reports = [json.load(open(p)) for p in sys.argv[1:]]
even = reports[0]["makespan_s"]
print(f"{'policy':<13} {'makespan':>9} {'predicted':>10} {'error':>7} {'imbalance':>10} {'vs even':>8}  verified")
for r in reports:
    print(f"{r['policy']:<13} {r['makespan_s']:>8.3f}s {r['predicted_makespan_s']:>9.3f}s {r['prediction_error']*100:>6.1f}% "
          f"{r['imbalance']:>10.3f} {r['makespan_s'] / even:>8.3f}  {r['verified']}")
PY
