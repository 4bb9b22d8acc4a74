#!/usr/bin/env bash
# Fault injection on a local cluster of three real workers (loopback, no root): for every policy
# and layout, run a verified multiply and, at a random moment while it runs, kill -9 a worker,
# SIGSTOP a worker, or kill -9 the coordinator. A run must end within CHAOS_TIMEOUT with either an
# exact product or a failure that names the faulty node, and afterwards the workers still alive
# must serve a small multiply. Prints a table and exits non-zero on any hang or wrong answer.
#
#   scripts/chaos.sh [ROUNDS]        ROUNDS per policy x fault cell (default 2)
#   env: N (2048) size of each multiply; CHAOS_TIMEOUT (45) seconds a run may take;
#        CHAOS_PORT (7391) first of three consecutive loopback ports; CHAOS_SEED random seed;
#        TESSERA_BIN_DIR (build/bin) where tessera and tessera-worker are;
#        CHAOS_FAULTS (all three) e.g. "stop-worker" to try only that fault;
#        CHAOS_CELLS (all ten) e.g. "model/rows proportional/chain" to try only those policy/layouts
#        ("chain": rows with B forwarded from worker to worker, --distribution chain; "2d-chain": the
#        2d layout, each group of columns' B along its own chain; "resident/power" and
#        "resident/cg": `tessera iterate` on a matrix kept on the nodes, RESIDENT_N (3072) square,
#        where a lost node's rows are placed again on the others and the method must still
#        converge exactly)
# A hung coordinator's threads are backtraced with gdb (when installed) into chaos-hang-*.txt
# in the current directory before it is killed.
#
# Outcomes per run:
#   survived  worker faults: exit 0 and the exact check passed (resident: converged, every
#             product checked);
#             coordinator kill: every worker served the next multiply (the run itself is gone)
#   refused   worker faults: non-zero exit (not 3, a failed check), the message names the faulty
#             node, survivors serve
#   BAD       hung past CHAOS_TIMEOUT, a wrong or unverified product, a failure that does not name
#             the node, or survivors that no longer serve (details are printed under the table)
#   missed    the run had finished before the fault's moment came; nothing was tested
set -euo pipefail
cd "$(dirname "$0")/.."

rounds="${1:-2}"
case "$rounds" in ''|*[!0-9]*) echo "chaos.sh: ROUNDS must be a number, got '$rounds'" >&2; exit 2 ;; esac
N="${N:-2048}"
timeout_s="${CHAOS_TIMEOUT:-45}"
port="${CHAOS_PORT:-7391}"
seed="${CHAOS_SEED:-$$}"
RANDOM="$seed"
bin="${TESSERA_BIN_DIR:-build/bin}"
T="$bin/tessera"
if [ ! -x "$T" ] || [ ! -x "$bin/tessera-worker" ]; then
  echo "chaos.sh: $T or $bin/tessera-worker missing; run scripts/build.sh (or set TESSERA_BIN_DIR)" >&2
  exit 1
fi
export TESSERA_WORKER_BIN="$bin/tessera-worker"

work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-chaos.XXXXXX")
run_dir="$work/run"
config="$work/chaos.yaml"
nodes=(node1 node2 node3)
coordinator_pid=""

# Stops what this script started, by pid: the coordinator of a run in flight, then the workers
# (woken first, since a stopped process cannot act on SIGTERM), through `tessera down`.
cleanup() {
  if [ -n "$coordinator_pid" ]; then kill -9 "$coordinator_pid" 2>/dev/null || true; fi
  for node in "${nodes[@]}"; do
    pid=$(cat "$run_dir/chaos/$node.pid" 2>/dev/null || true)
    [ -z "$pid" ] || kill -CONT "$pid" 2>/dev/null || true
  done
  "$T" down "$config" --run-dir "$run_dir" > /dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# cluster_file PATH NODE...: a cluster description with these nodes; the survivors check uses one
# without the faulty node, so that it asks only the workers that should still serve.
cluster_file() {
  local path="$1"; shift
  {
    echo "cluster: chaos"
    echo "secret: chaos-script-secret"
    echo "nodes:"
    for node in "$@"; do
      echo "  - {name: $node, host: 127.0.0.1, port: $(( port + ${node#node} - 1 )), threads: 1}"
    done
  } > "$path"
}
cluster_file "$config" "${nodes[@]}"

worker_pid() { cat "$run_dir/chaos/$1.pid"; }

# Starts the workers that are not running (tessera up keeps live ones) and waits until all answer.
cluster_up() {
  "$T" up "$config" --run-dir "$run_dir" > "$work/up.log" 2>&1 || { cat "$work/up.log" >&2; return 1; }
  for _ in $(seq 1 50); do
    if timeout 10 "$T" status "$config" > /dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  echo "chaos.sh: the workers did not come back:" >&2
  timeout 10 "$T" status "$config" >&2 || true
  return 1
}

# serves CONFIG: a small exact multiply within a deadline.
serves() {
  timeout -k 5 30 "$T" multiply "$1" --n 96 --policy even --fill integers --verify exact > "$work/serves.log" 2>&1 &&
    grep -q '^verified: true' "$work/serves.log"
}

echo "chaos.sh: seed $seed (CHAOS_SEED=$seed repeats these moments); starting 3 workers on 127.0.0.1:$port-$(( port + 2 )) (run dir $run_dir)"
cluster_up
"$T" profile "$config" > "$work/profile.log" 2>&1 || { cat "$work/profile.log" >&2; exit 1; }

# One fault-free run sets the window for faults: from the start to the beginning of verification
# (the local exact product), when the workers are busy with the multiply.
start=$(date +%s%N)
"$T" multiply "$config" --n "$N" --policy even --fill integers --verify exact > "$work/baseline.log" 2>&1 || {
  echo "chaos.sh: the fault-free baseline multiply failed:" >&2; cat "$work/baseline.log" >&2; exit 1; }
wall_ms=$(( ($(date +%s%N) - start) / 1000000 ))
verify_ms=$(sed -n 's/^verified: .*, \([0-9.]*\) s)$/\1/p' "$work/baseline.log" | awk '{ printf "%d", $1 * 1000 }')
window_ms=$(( wall_ms - ${verify_ms:-0} ))
[ "$window_ms" -ge 300 ] || window_ms=300
echo "chaos.sh: baseline n=$N took $wall_ms ms, of which the multiply about $window_ms ms; faults land in 100..$window_ms ms"

# The resident cells' matrix: symmetric positive definite with a dominant eigenvalue 1.25x the
# next (power iteration settles in some sixty steps, CG in fewer), and a right-hand side; their
# fault window is a fault-free `tessera iterate`'s length.
RESIDENT_N="${RESIDENT_N:-3072}"
resident_matrix="$work/resident.npy"
resident_rhs="$work/resident-rhs.npy"
/usr/bin/python3 - "$RESIDENT_N" "$resident_matrix" "$resident_rhs" <<'PY'
import sys
import numpy as np
n = int(sys.argv[1])
rng = np.random.default_rng(3)
a = rng.uniform(-1, 1, (n, n))
a = (a + a.T) / 2
edge = 2 * np.sqrt(n / 6)
u = rng.standard_normal(n)
u /= np.linalg.norm(u)
a += 1.05 * edge * np.eye(n) + 1.6 * edge * np.outer(u, u)
np.save(sys.argv[2], a)
np.save(sys.argv[3], rng.standard_normal((n, 1)))
PY
# iterate METHOD: the resident run of a cell, its placement cache inside the work folder. It
# execs, so run it in a subshell: in the background its pid is then the coordinator's own.
iterate() {
  local extra=(--iterations 500 --tol 1e-12)
  [ "$1" != cg ] || extra=(--rhs "$resident_rhs" --tol 1e-10)
  exec "$T" iterate "$config" --method "$1" --matrix "$resident_matrix" "${extra[@]}" --placement-cache "$work/cache"
}
# A resident run drops a node silent for 60 s (multiply::ResidentOptions::node_timeout_s: long
# enough for a Pi to write what it was sent to an SD card), so its cells wait longer.
resident_timeout_s=$(( timeout_s > 75 ? timeout_s : 75 ))
start=$(date +%s%N)
(iterate power) > "$work/resident-baseline.log" 2>&1 || {
  echo "chaos.sh: the fault-free resident power iteration failed:" >&2; cat "$work/resident-baseline.log" >&2; exit 1; }
resident_window_ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$resident_window_ms" -ge 300 ] || resident_window_ms=300
echo "chaos.sh: resident power iteration n=$RESIDENT_N took $resident_window_ms ms; its faults land in 100..$resident_window_ms ms"

# "chain" is the rows layout with B forwarded along the workers (--distribution chain), "2d-chain"
# the 2d layout with each group of columns' B forwarded along its own chain.
cells=("even rows" "proportional rows" "proportional chain" "proportional 2d" "proportional 2d-chain"
       "proportional 3d" "model rows" "dynamic rows" "resident power" "resident cg")
faults=(kill-worker stop-worker kill-coordinator)
if [ -n "${CHAOS_CELLS:-}" ]; then
  cells=()
  for cell in $CHAOS_CELLS; do
    case "$cell" in */*) cells+=("${cell%%/*} ${cell#*/}") ;; *) cells+=("$cell rows") ;; esac
  done
fi
if [ -n "${CHAOS_FAULTS:-}" ]; then read -r -a faults <<< "$CHAOS_FAULTS"; fi
declare -A tried survived refused bad missed
details=()

# One run: multiply in the background, the fault at a random moment, then judge and repair.
run_once() {
  local policy="$1" layout="$2" fault="$3" key="$4"
  local victim="${nodes[$(( RANDOM % 3 ))]}"
  local window="$window_ms" deadline_s="$timeout_s"
  [ "$policy" != resident ] || { window="$resident_window_ms"; deadline_s="$resident_timeout_s"; }
  local delay_ms=$(( 100 + (RANDOM * 32768 + RANDOM) % (window - 99) ))
  local log="$work/run.log" rc=0 outcome="" why=""
  tried[$key]=$(( ${tried[$key]:-0} + 1 ))

  local shape=(--layout "$layout")
  [ "$layout" != chain ] || shape=(--layout rows --distribution chain)
  [ "$layout" != 2d-chain ] || shape=(--layout 2d --distribution chain)
  if [ "$policy" = resident ]; then
    (iterate "$layout") > "$log" 2>&1 &
  else
    "$T" multiply "$config" --n "$N" --policy "$policy" "${shape[@]}" --fill integers --verify exact \
      > "$log" 2>&1 &
  fi
  coordinator_pid=$!
  sleep "$(awk -v ms="$delay_ms" 'BEGIN { printf "%.3f", ms / 1000 }')"
  local landed=1
  if ! kill -0 "$coordinator_pid" 2>/dev/null; then
    landed=0
  else
    case "$fault" in
      kill-worker) kill -9 "$(worker_pid "$victim")" ;;
      stop-worker) kill -STOP "$(worker_pid "$victim")" ;;
      kill-coordinator) kill -9 "$coordinator_pid" ;;
    esac
  fi
  # Bounded wait for the coordinator: CHAOS_TIMEOUT seconds (resident cells: at least 75) in 0.1 s steps.
  local hung=1
  for _ in $(seq 1 $(( deadline_s * 10 ))); do
    if ! kill -0 "$coordinator_pid" 2>/dev/null; then hung=0; break; fi
    sleep 0.1
  done
  local trace=""
  if [ "$hung" -eq 1 ]; then
    if command -v gdb > /dev/null; then
      trace="chaos-hang-$$-${#details[@]}.txt"
      timeout 60 gdb -p "$coordinator_pid" -batch -ex "thread apply all bt" > "$trace" 2>&1 || true
    fi
    kill -9 "$coordinator_pid" 2>/dev/null || true
  fi
  wait "$coordinator_pid" 2>/dev/null || rc=$?
  coordinator_pid=""

  local survivors=()
  for node in "${nodes[@]}"; do
    if [ "$fault" = kill-coordinator ] || [ "$node" != "$victim" ]; then survivors+=("$node"); fi
  done
  cluster_file "$work/survivors.yaml" "${survivors[@]}"

  if [ "$landed" -eq 0 ]; then
    outcome=missed
  elif [ "$hung" -eq 1 ]; then
    outcome=bad; why="no end within ${deadline_s} s (killed${trace:+; backtrace in $trace})"
  elif [ "$fault" = kill-coordinator ]; then
    outcome=survived
  elif [ "$rc" -eq 0 ]; then
    if [ "$policy" = resident ]; then
      if grep -q '; converged$' "$log"; then outcome=survived; else outcome=bad; why="exit 0 without a converged, checked answer"; fi
    elif grep -q '^verified: true' "$log"; then outcome=survived; else outcome=bad; why="exit 0 without an exact product"; fi
  elif [ "$rc" -eq 3 ]; then
    # The run finished and its product failed the exact check: a wrong answer caught, not a refusal.
    outcome=bad; why="the product failed verification (exit 3)"
  elif grep -qw "$victim" "$log"; then
    outcome=refused
  else
    outcome=bad; why="exit $rc and the message does not name $victim"
  fi
  if [ "$outcome" != missed ] && ! serves "$work/survivors.yaml"; then
    why="${why:+$why; }the surviving workers (${survivors[*]}) did not serve a small multiply: $(grep -v '^$' "$work/serves.log" | tail -n 1 || true)"
    outcome=bad
  fi
  case "$outcome" in
    survived) survived[$key]=$(( ${survived[$key]:-0} + 1 )) ;;
    refused) refused[$key]=$(( ${refused[$key]:-0} + 1 )) ;;
    missed) missed[$key]=$(( ${missed[$key]:-0} + 1 )) ;;
    bad)
      bad[$key]=$(( ${bad[$key]:-0} + 1 ))
      details+=("$key, $victim at ${delay_ms} ms: $why; coordinator said: $(grep -v '^$' "$log" | tail -n 1 || true)") ;;
  esac
  printf '  %-20s %-16s %-6s at %5d ms -> %s (exit %s)\n' "$policy/$layout" "$fault" "$victim" "$delay_ms" "$outcome" "$rc"

  # Repair for the next run: wake a stopped worker and replace it, restart killed ones.
  if [ "$fault" = stop-worker ]; then
    local pid; pid=$(worker_pid "$victim")
    kill -CONT "$pid" 2>/dev/null || true
    kill -9 "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  cluster_up
}

for ((round = 1; round <= rounds; round++)); do
  echo "chaos.sh: round $round of $rounds"
  for cell in "${cells[@]}"; do
    set -- $cell
    for fault in "${faults[@]}"; do
      label="$1"; [ "$2" = rows ] || label="$1/$2"
      run_once "$1" "$2" "$fault" "$label|$fault"
    done
  done
done

echo
printf '%-20s %-17s %6s %9s %8s %12s %7s\n' "policy/layout" fault tried survived refused "hung/wrong" missed
failed=0
for cell in "${cells[@]}"; do
  set -- $cell
  label="$1"; [ "$2" = rows ] || label="$1/$2"
  for fault in "${faults[@]}"; do
    key="$label|$fault"
    printf '%-20s %-17s %6s %9s %8s %12s %7s\n' "$label" "$fault" "${tried[$key]:-0}" "${survived[$key]:-0}" \
      "${refused[$key]:-0}" "${bad[$key]:-0}" "${missed[$key]:-0}"
    [ "${bad[$key]:-0}" -eq 0 ] || failed=1
  done
done
if [ ${#details[@]} -gt 0 ]; then
  echo
  echo "hung or wrong:"
  printf '  %s\n' "${details[@]}"
fi
exit "$failed"
