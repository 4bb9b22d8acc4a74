#!/usr/bin/env bash
# Runs every policy (and proportional/2d) once on every shipped local config: up, profile (reused
# when saved), one verified multiply per policy, then every graph algorithm (async, verified), down. A smoke check that the user's path works on
# each file, not a benchmark. pi-lab.yaml names real machines and is skipped. Needs root for the
# emulated configs. Usage: scripts/check-configs.sh   env: N (1024)
set -euo pipefail
cd "$(dirname "$0")/.."
N="${N:-1024}"
T=build/bin/tessera
[ -x "$T" ] || scripts/build.sh > /dev/null
current=""
trap '[ -z "$current" ] || "$T" down "$current" > /dev/null || true' EXIT
printf "%-34s %-18s %10s  %s\n" config policy makespan verified
for config in configs/local*.yaml; do
  case "$config" in *.profile.yaml) continue ;; esac
  current="$config"
  "$T" up "$config" > /dev/null
  "$T" profile "$config" > /dev/null 2>&1
  for run in "even rows" "proportional rows" "model rows" "dynamic rows" "proportional 2d"; do
    set -- $run
    line=$("$T" multiply "$config" --n "$N" --policy "$1" --layout "$2" --fill integers --verify exact 2>&1 || true)
    makespan=$(grep -o "^makespan [0-9.]* s" <<<"$line" | cut -d' ' -f2 || true)
    verified=$(grep -o "^verified: [a-z]*" <<<"$line" | cut -d' ' -f2 || true)
    label="$1"; [ "$2" = rows ] || label="$1/$2"
    printf "%-34s %-18s %9ss  %s\n" "$config" "$label" "${makespan:-FAILED}" "${verified:-no}"
  done
  for algorithm in pagerank "katz --beta 0.001" cc "sssp --source 0"; do
    line=$("$T" graph "$config" --algorithm $algorithm --generate rmat:12 --verify 2>&1 || true)
X
    verified=$(grep -q "^verified: " <<<"$line" && ! grep -q "FAILED" <<<"$line" && echo yes || echo no)
    printf "%-34s %-18s %9ss  %s\n" "$config" "graph ${algorithm%% *}" "${wall:-FAILED}" "$verified"
  done
  "$T" down "$config" > /dev/null
  current=""
done
