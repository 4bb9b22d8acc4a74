#!/usr/bin/env bash
# The peers study (docs/studies.md): Tessera beside ScaLAPACK (pdgemm over OpenMPI) and Dask
# distributed, all under the same emulation. For each cluster file it brings up its own copy of
# the cluster (cluster peers-<name>, ports 7601.., run folder build/peers/run), profiles it, and
# for each n runs RUNS interleaved rounds; a round is, in an order rotated from round to round:
#   Tessera   `tessera multiply` with each policy, --verify freivalds, --report JSON
#             (makespan from the report, and the command's wall time);
#   ScaLAPACK build/peers/pdgemm_driver (peers/scalapack/pdgemm_driver.c) under mpirun, one rank
#             per node, each grid x NB (end to end from rank 0, pdgemm alone, mpirun's wall time);
#   Dask      a scheduler in the root namespace, one single-thread `dask worker` per node,
#             peers/dask/dask_gemm.py with every chunk size (end to end from the client).
# Every MPI rank and Dask worker runs inside the cgroup of the node it stands for, and inside its
# network namespace when the node has a shaped link (peers/place.sh, from the cluster's
# emulation.json); rank 0 and the first Dask worker stand for the first node of the file. The
# cluster's own tessera-workers stay up in the same cgroups, idle (blocked in accept/read) while a
# peer runs; their CPU time is read around every peer run and recorded. Every product is checked
# (Freivalds); a failed check is recorded as such.
# Writes OUT/{runs.csv,summary.csv,report.md,peers.png}; logs in build/peers/logs.
# Needs root (cgroups, namespaces). Usage:
#   scripts/peers.sh [CONFIG...]   (default configs/local-mixed-lan.yaml configs/local-mixed.yaml)
#   env: N ("2048 4096"), RUNS (5), POLICIES ("model proportional dynamic even"),
#        GRIDS ("2x2 1x4"), NBS ("64 128"), CHUNKS ("512 1024 2048"), OUT (experiments/results/peers)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -gt 0 ]; then CONFIGS=("$@"); else CONFIGS=(configs/local-mixed-lan.yaml configs/local-mixed.yaml); fi
N="${N:-2048 4096}"
RUNS="${RUNS:-5}"
POLICIES="${POLICIES:-model proportional dynamic even}"
GRIDS="${GRIDS:-2x2 1x4}"
NBS="${NBS:-64 128}"
CHUNKS="${CHUNKS:-512 1024 2048}"
OUT="${OUT:-experiments/results/peers}"
WORK=build/peers
T=build/bin/tessera
DRIVER=$WORK/pdgemm_driver
PYTHON=/usr/bin/python3  # Debian's python3, where python3-distributed lives
# Ports of this study (7600-7699): nodes 7601.., Dask scheduler 7620, Dask workers 7621... MPI's TCP
# transport, PMIx and mpirun take ports the kernel picks from its ephemeral range, which no fixed
# service uses: a fixed range ran dry (a rank's listening port stays in TIME_WAIT for a minute
# after its run, and Open MPI binds without SO_REUSEADDR).
FIRST_NODE_PORT=7601
DASK_SCHEDULER_PORT=7620
DASK_FIRST_WORKER_PORT=7621
PEER_THREADS=(OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1)  # one thread per node, as Tessera's workers

scripts/setup-peers.sh
if [ ! -x "$T" ] || [ ! -x build/bin/tessera-worker ]; then
  nice -n 19 cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
  nice -n 19 cmake --build build -j2 --target tessera tessera-worker > /dev/null
fi
mkdir -p "$WORK/configs" "$WORK/logs" "$OUT"
if [ ! -x "$DRIVER" ] || [ peers/scalapack/pdgemm_driver.c -nt "$DRIVER" ]; then
  # shellcheck disable=SC2046  # pkg-config's flags are meant to split
  nice -n 19 mpicc -O2 -std=c11 -Wall -Wextra -Wshadow -o "$DRIVER" peers/scalapack/pdgemm_driver.c \
    $(pkg-config --libs scalapack-openmpi) -lm
fi
export TESSERA_RUN_DIR="$PWD/$WORK/run"
mkdir -p "$TESSERA_RUN_DIR"
chmod 700 "$TESSERA_RUN_DIR"

# What is running now, so that an interruption stops exactly that and nothing else.
UP_CONFIG=""
CHILD=""
DASK_PIDS=()
stop_dask() {
  local pid waited
  for pid in "${DASK_PIDS[@]}"; do kill -TERM "$pid" 2> /dev/null || true; done
  for pid in "${DASK_PIDS[@]}"; do
    waited=0
    while kill -0 "$pid" 2> /dev/null && [ $waited -lt 100 ]; do sleep 0.1; waited=$((waited + 1)); done
    kill -KILL "$pid" 2> /dev/null || true
    wait "$pid" 2> /dev/null || true
  done
  DASK_PIDS=()
}
cleanup() {
  if [ -n "$CHILD" ]; then kill -TERM "$CHILD" 2> /dev/null || true; wait "$CHILD" 2> /dev/null || true; fi
  stop_dask
  # `down` also removes the cgroups, killing whatever of ours is still inside them.
  if [ -n "$UP_CONFIG" ]; then "$T" down "$UP_CONFIG" > /dev/null 2>&1 || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# run_child LOG CMD...: runs CMD in the background (so that a signal reaches the trap at once) and
# waits; sets RC and WALL (seconds).
run_child() {
  local log="$1" start
  shift
  start=$EPOCHREALTIME
  "$@" > "$log" 2>&1 &
  CHILD=$!
  RC=0
  wait "$CHILD" || RC=$?
  CHILD=""
  WALL=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.6f", b - a }')
}
# CPU seconds (user + system) the cluster's own tessera-workers have used so far; read around every
# peer run to show that they stay idle while MPI ranks and Dask workers share their cgroups.
CLOCK_TICKS=$(getconf CLK_TCK)
workers_cpu_s() {
  local pid_file ticks=0 stat
  for pid_file in "$TESSERA_RUN_DIR/$CLUSTER"/*.pid; do
    stat=$(cat "/proc/$(cat "$pid_file")/stat" 2> /dev/null) || continue
    stat=${stat##*) }  # fields after the command name; utime and stime are fields 14 and 15 of the line
    read -r -a stat <<< "$stat"
    ticks=$((ticks + stat[11] + stat[12]))
  done
  awk -v t="$ticks" -v hz="$CLOCK_TICKS" 'BEGIN { printf "%.2f", t / hz }'
}
seconds_between() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
field() { sed -n "s/.*[[:space:]]$1=\([^[:space:]]*\).*/\1/p" <<< "$2"; }  # field NAME "RESULT a=1 b=2"
# record ROW: appends ROW and the host's 1-minute load average (other users' work shows there).
record() { echo "$1,$(cut -d' ' -f1 /proc/loadavg)" >> "$OUT/runs.csv"; }

echo "config,n,round,system,variant,end_to_end_s,compute_s,command_wall_s,verified,idle_tessera_workers_cpu_s,load_1min" > "$OUT/runs.csv"
SETUP="$WORK/setup.md"
{
  echo "- machine: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), Linux $(uname -r)," \
       "$(free -g | awk '/^Mem:/ { print $2 }') GiB; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- tessera $(git rev-parse --short HEAD) ($(git status --porcelain --untracked-files=no | grep -q . &&
    echo 'with changes to tracked files' || echo 'no changes to tracked files'));" \
       "$(mpirun --version | head -1); ScaLAPACK $(dpkg-query -W -f='${Version}' libscalapack-openmpi-dev);" \
       "Dask $($PYTHON -c 'import dask, distributed; print(dask.__version__ + ", distributed " + distributed.__version__)');" \
       "NumPy $($PYTHON -c 'import numpy; print(numpy.__version__)'); OpenBLAS $(dpkg-query -W -f='${Version}' libopenblas0-pthread:amd64 2> /dev/null || echo '?')"
  echo "- command: \`N=\"$N\" RUNS=$RUNS scripts/peers.sh ${CONFIGS[*]}\`; policies $POLICIES; grids $GRIDS; NB $NBS; chunks $CHUNKS"
} > "$SETUP"

bring_up() {  # bring_up SOURCE_CONFIG: sets CONFIG, CLUSTER and the NODE_* arrays
  local source="$1" base
  base=$(basename "$source")
  CONFIG="$WORK/configs/$base"
  LABEL="${base%.yaml}"
  CLUSTER=$($PYTHON peers/cluster_tool.py copy-config "$source" "$CONFIG" "$FIRST_NODE_PORT")
  chmod 600 "$CONFIG"
  UP_CONFIG="$CONFIG"
  "$T" up "$CONFIG" | tee "$WORK/logs/$CLUSTER-up.txt"
  "$T" profile "$CONFIG" --refresh | tee "$WORK/logs/$CLUSTER-profile.txt"
  NODE_NAME=() NODE_CG=() NODE_NS=() NODE_HOST=() NODE_ADDR=()
  local name cg ns host addr
  while read -r name cg ns host addr; do
    NODE_NAME+=("$name") NODE_CG+=("$cg") NODE_NS+=("$ns") NODE_HOST+=("$host") NODE_ADDR+=("$addr")
    if [ "$cg" = "-" ]; then echo "peers: node $name of $source is not CPU-emulated; every node must be" >&2; exit 1; fi
  done < <($PYTHON peers/cluster_tool.py nodes "$TESSERA_RUN_DIR/$CLUSTER/emulation.json")
  # Namespaced nodes reach the root namespace at the host end of their own veth; every host end
  # is an address of this machine, so the first one serves as the root's address for all.
  SUBNET=127.0.0.0/8
  ROOT_ADDRESS=127.0.0.1
  local i
  for i in "${!NODE_NAME[@]}"; do
    if [ "${NODE_NS[$i]}" != "-" ]; then SUBNET=198.18.0.0/15; ROOT_ADDRESS=${NODE_HOST[$i]}; break; fi
  done
  {
    echo "- $source as cluster \`$CLUSTER\` (MPI and Dask traffic on $SUBNET):"
    for i in "${!NODE_NAME[@]}"; do
      echo "  - ${NODE_NAME[$i]}: cgroup ${NODE_CG[$i]} (quota $(cat "${NODE_CG[$i]}/cpu.cfs_quota_us" 2> /dev/null ||
        cat "${NODE_CG[$i]}/cpu.max") per $(cat "${NODE_CG[$i]}/cpu.cfs_period_us" 2> /dev/null || echo 'cpu.max') us)," \
        "$([ "${NODE_NS[$i]}" = "-" ] && echo 'root namespace' || echo "namespace ${NODE_NS[$i]} at ${NODE_ADDR[$i]}")"
    done
    echo "  - profiled speeds: $(awk '/^node +GFLOP/ { on = 1; next } /^coordinator/ { on = 0 }
      on && NF { printf "%s%s %s GFLOP/s", (count++ ? ", " : ""), $1, $2 }' "$WORK/logs/$CLUSTER-profile.txt")"
  } >> "$SETUP"
}

bring_down() {
  "$T" down "$CONFIG" > /dev/null
  UP_CONFIG=""
}

run_tessera() {  # run_tessera N ROUND
  local n="$1" round="$2" policy report makespan verified
  for policy in $POLICIES; do
    report="$WORK/logs/$CLUSTER-tessera-$policy-$n-$round.json"
    run_child "$WORK/logs/$CLUSTER-tessera-$policy-$n-$round.txt" \
      "$T" multiply "$CONFIG" --n "$n" --policy "$policy" --verify freivalds --report "$report"
    if [ "$RC" -eq 0 ]; then
      read -r makespan verified < <($PYTHON -c 'import json, sys; r = json.load(open(sys.argv[1]));
print(r["makespan_s"], "yes" if r["verified"] else "no")' "$report")
    else
      makespan="" verified="failed(exit $RC)"
    fi
    record "$LABEL,$n,$round,tessera,$policy,$makespan,,$WALL,$verified,"
    echo "  tessera $policy: makespan ${makespan:-?} s, command $WALL s, verified $verified"
  done
}

run_scalapack() {  # run_scalapack N ROUND
  local n="$1" round="$2" grid nb p q i app result workers_before idle_cpu
  for grid in $GRIDS; do
    p=${grid%x*} q=${grid#*x}
    if [ $((p * q)) -ne ${#NODE_NAME[@]} ]; then
      echo "peers: grid $grid needs $((p * q)) ranks, $CLUSTER has ${#NODE_NAME[@]} nodes; skipped" >&2
      continue
    fi
    for nb in $NBS; do
      app=()
      for i in "${!NODE_NAME[@]}"; do
        [ "$i" -gt 0 ] && app+=(:)
        app+=(-np 1 peers/place.sh "${NODE_CG[$i]}" "${NODE_NS[$i]}" "$DRIVER" "$n" "$p" "$q" "$nb")
      done
      # PMIx (how ranks reach mpirun) must listen beyond loopback for ranks in other namespaces.
      workers_before=$(workers_cpu_s)
      run_child "$WORK/logs/$CLUSTER-scalapack-$grid-$nb-$n-$round.txt" \
        env PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include="$SUBNET" \
        timeout 900 mpirun --allow-run-as-root --oversubscribe --bind-to none \
        --mca btl tcp,self --mca btl_tcp_if_include "$SUBNET" \
        -x OPENBLAS_NUM_THREADS=1 "${app[@]}"
      idle_cpu=$(seconds_between "$workers_before" "$(workers_cpu_s)")
      result=$(grep '^RESULT' "$WORK/logs/$CLUSTER-scalapack-$grid-$nb-$n-$round.txt" || true)
      local e2e pd verified
      e2e=$(field end_to_end_s "$result") pd=$(field pdgemm_s "$result") verified=$(field verified "$result")
      if [ "$RC" -ne 0 ]; then verified="failed(exit $RC)"; e2e="" pd=""; fi
      record "$LABEL,$n,$round,scalapack,${grid}-nb${nb},$e2e,$pd,$WALL,$verified,$idle_cpu"
      echo "  scalapack $grid NB $nb: end to end ${e2e:-?} s, pdgemm ${pd:-?} s, mpirun $WALL s, verified $verified;" \
        "tessera-workers used $idle_cpu CPU s meanwhile"
    done
  done
}

start_dask() {
  local i port listen contact scheduler
  local scheduler_host=127.0.0.1
  [ "$SUBNET" = "127.0.0.0/8" ] || scheduler_host=0.0.0.0  # namespaced workers reach it at their veth's host end
  /usr/bin/dask scheduler --host "$scheduler_host" --port "$DASK_SCHEDULER_PORT" --no-dashboard \
    > "$WORK/logs/$CLUSTER-dask-scheduler.txt" 2>&1 &
  DASK_PIDS+=($!)
  for i in "${!NODE_NAME[@]}"; do
    port=$((DASK_FIRST_WORKER_PORT + i))
    if [ "${NODE_NS[$i]}" = "-" ]; then
      listen="tcp://$scheduler_host:$port" contact="tcp://$ROOT_ADDRESS:$port" scheduler="tcp://127.0.0.1:$DASK_SCHEDULER_PORT"
    else
      listen="tcp://${NODE_ADDR[$i]}:$port" contact="$listen" scheduler="tcp://${NODE_HOST[$i]}:$DASK_SCHEDULER_PORT"
    fi
    peers/place.sh "${NODE_CG[$i]}" "${NODE_NS[$i]}" env "${PEER_THREADS[@]}" \
      /usr/bin/dask worker "$scheduler" --name "${NODE_NAME[$i]}" --nthreads 1 --no-nanny \
      --no-dashboard --memory-limit 0 --listen-address "$listen" --contact-address "$contact" \
      > "$WORK/logs/$CLUSTER-dask-worker-${NODE_NAME[$i]}.txt" 2>&1 &
    DASK_PIDS+=($!)
  done
}

run_dask() {  # run_dask N ROUND: fresh scheduler and workers for the round, every chunk size
  local n="$1" round="$2" chunks line log workers_before idle_cpu
  # Rotate the chunk order from round to round, so that no chunk size is always first.
  read -r -a chunks <<< "$CHUNKS"
  local shift_by=$(((round - 1) % ${#chunks[@]}))
  chunks=("${chunks[@]:$shift_by}" "${chunks[@]:0:$shift_by}")
  log="$WORK/logs/$CLUSTER-dask-$n-$round.txt"
  workers_before=$(workers_cpu_s)
  start_dask
  run_child "$log" timeout 1800 $PYTHON peers/dask/dask_gemm.py "tcp://127.0.0.1:$DASK_SCHEDULER_PORT" --n "$n" \
    --chunks "${chunks[@]}" --workers "${#NODE_NAME[@]}"
  stop_dask
  idle_cpu=$(seconds_between "$workers_before" "$(workers_cpu_s)")
  echo "  dask: tessera-workers used $idle_cpu CPU s during the whole Dask round (start, every chunk, stop)"
  local chunk e2e verified seen=0
  while read -r line; do
    chunk=$(field chunk "$line") e2e=$(field end_to_end_s "$line") verified=$(field verified "$line")
    record "$LABEL,$n,$round,dask,chunk$chunk,$e2e,,,$verified,$idle_cpu"
    echo "  dask chunk $chunk: end to end $e2e s, verified $verified"
    seen=$((seen + 1))
  done < <(grep '^RESULT' "$log" || true)
  if [ "$RC" -ne 0 ] && [ "$seen" -lt "${#chunks[@]}" ]; then
    record "$LABEL,$n,$round,dask,incomplete,,,,failed(exit $RC),$idle_cpu"
    echo "  dask: exit $RC after $seen of ${#chunks[@]} chunk sizes (see $log)" >&2
  fi
}

for source in "${CONFIGS[@]}"; do
  bring_up "$source"
  for n in $N; do
    for round in $(seq 1 "$RUNS"); do
      systems=(tessera scalapack dask)
      shift_by=$(((round - 1) % 3))
      systems=("${systems[@]:$shift_by}" "${systems[@]:0:$shift_by}")
      echo "$CLUSTER n=$n round $round/$RUNS: ${systems[*]}"
      for system in "${systems[@]}"; do "run_$system" "$n" "$round"; done
    done
  done
  bring_down
done
echo "- load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$SETUP"

$PYTHON peers/summarize.py "$OUT" "$SETUP"
